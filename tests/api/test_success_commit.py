"""A billed success commits its usage row and its log row together, before the response.

The database refuses the success's log row (a trigger: a real failure inside the commit),
so the whole commit fails: the client gets 500, nothing is billed, nothing is created, and
the 500 is what the log says.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from tests.helpers.api import (
    assert_error,
    clone,
    raised_voice_sample,
    speak,
    transcribe,
    usage_units,
)
from tests.helpers.app import Tenant, Tenants, fresh_database, make_settings, running
from tests.helpers.dbfaults import refusing_log_rows
from tests.helpers.voices import GERMAN
from tests.helpers.wav import silent_wav
from voice_service.app import create_app
from voice_service.core.models import RequestLogEntry, Voice
from voice_service.inference.engines import Engines

pytestmark = pytest.mark.anyio

SUCCESS = "NEW.status < 300"


@pytest.fixture
def own_database(tmp_path: Path) -> Iterator[str]:
    # The trigger must not reach the suite's shared database.
    with fresh_database(tmp_path) as url:
        yield url


@pytest.fixture
async def service(
    tmp_path: Path, own_database: str, engines: Engines
) -> AsyncIterator[tuple[httpx.AsyncClient, Tenants, Tenant]]:
    settings = make_settings(tmp_path, own_database)
    async with running(create_app(settings, engines)) as client:
        tenants = Tenants(settings)
        yield client, tenants, await tenants.create()


async def _logged(tenants: Tenants, request_id: str) -> tuple[int, str | None] | None:
    row = await tenants.run(lambda s: s.get(RequestLogEntry, request_id))
    return None if row is None else (row.status, row.error_code)


async def test_a_success_whose_commit_fails_is_500_and_not_billed(
    service: tuple[httpx.AsyncClient, Tenants, Tenant],
) -> None:
    client, tenants, tenant = service
    async with refusing_log_rows(tenants, SUCCESS):
        refused = await speak(client, tenant, "Hallo.", GERMAN)
    error = assert_error(refused, 500, "INTERNAL_ERROR")
    assert await usage_units(tenants, tenant.org_id) == []
    assert await _logged(tenants, error["request_id"]) == (500, "INTERNAL_ERROR")

    served = await speak(client, tenant, "Hallo.", GERMAN)
    assert served.status_code == 200
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", 6)]
    assert await _logged(tenants, served.headers["x-request-id"]) == (200, None)


async def test_a_transcription_whose_commit_fails_is_not_billed(
    service: tuple[httpx.AsyncClient, Tenants, Tenant],
) -> None:
    client, tenants, tenant = service
    async with refusing_log_rows(tenants, SUCCESS):
        refused = await transcribe(
            client, tenant, silent_wav(16000, 16000), language="en", endpoint="/asr"
        )
    error = assert_error(refused, 500, "INTERNAL_ERROR")
    assert await usage_units(tenants, tenant.org_id) == []
    assert await _logged(tenants, error["request_id"]) == (500, "INTERNAL_ERROR")


async def test_a_clone_whose_commit_fails_creates_no_voice(
    service: tuple[httpx.AsyncClient, Tenants, Tenant], tmp_path: Path
) -> None:
    client, tenants, tenant = service
    async with refusing_log_rows(tenants, SUCCESS):
        refused = await clone(client, tenant, raised_voice_sample(tmp_path))
    assert_error(refused, 500, "INTERNAL_ERROR")
    assert await usage_units(tenants, tenant.org_id) == []
    voices = await tenants.run(
        lambda s: s.scalar(
            select(func.count()).select_from(Voice).where(Voice.org_id == tenant.org_id)
        )
    )
    assert voices == 0
