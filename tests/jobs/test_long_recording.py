"""A thirty-minute recording as a job: decoded as it goes, cut at its pauses, and its
transcript the sync transcript of each piece, timed from the start of the recording. Its
length is the backend's concern only through the blob store, which the other job tests
cover on every backend, so it runs in the first pass only (.ci/run)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.app import Tenant, Tenants, fresh_database, make_settings
from tests.helpers.jobs import spread
from tests.jobs.test_transcription_jobs import transcribed_as_its_pieces
from voice_service.settings import Settings

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    with fresh_database(tmp_path) as url:
        yield make_settings(tmp_path, url)


async def test_thirty_minutes_are_the_sync_transcript_of_each_piece(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants
) -> None:
    await transcribed_as_its_pieces(client, tenant, tenants, spread(minutes=30))
