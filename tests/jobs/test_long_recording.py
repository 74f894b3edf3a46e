"""A thirty-minute recording as a job: decoded as it goes, cut at its pauses, and its
transcript the sync transcript of each piece, timed from the start of the recording. Its
length is the backend's concern only through the blob store, which the other job tests
cover on every backend, so it runs in the first pass only (.ci/run)."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers.app import Tenant, Tenants
from tests.helpers.jobs import spread
from tests.jobs.test_transcription_jobs import transcribed_as_its_pieces

pytestmark = pytest.mark.anyio


async def test_thirty_minutes_are_the_sync_transcript_of_each_piece(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants
) -> None:
    await transcribed_as_its_pieces(client, tenant, tenants, spread(minutes=30))
