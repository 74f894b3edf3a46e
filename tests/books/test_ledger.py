"""The request ledger, told each way a request can end: exactly one log row each time, a
usage row only for a success, committed with it (the whole request paths are tested in
tests/api; these drive the ledger itself against the real database)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi import FastAPI
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tests.helpers.app import Tenant, Tenants, fresh_database, make_settings, running
from tests.helpers.dbfaults import refusing_log_rows
from voice_service.app import create_app
from voice_service.books.ledger import Books, Ledger
from voice_service.books.usage.charge import Charge
from voice_service.core.errors import ClientClosedRequest, InvalidRequest, ProviderError
from voice_service.core.models import RequestLogEntry, UsageRecord, Voice
from voice_service.inference.engines import Engines
from voice_service.tenancy.principal import principal_for_key
from voice_service.web.context import AppContext

pytestmark = pytest.mark.anyio

CHARGE = Charge("text-to-speech", 12, "voice_en_joe")


@dataclass
class Rows:
    log: list[tuple[int, str | None, int | None]]  # status, error code, bytes sent
    usage: list[tuple[str, int, str | None]]  # endpoint, units, voice


@dataclass
class Harness:
    """The app's books, and a tenant whose requests the ledgers record."""

    books: Books
    tenants: Tenants
    tenant: Tenant

    async def ledger(self, method: str = "POST", path: str = "/api/v1/text-to-speech") -> Ledger:
        ledger = Ledger(self.books, method, path)
        principal = await self.tenants.run(lambda s: principal_for_key(s, self.tenant.key_id))
        assert principal is not None
        ledger.admit(principal)
        return ledger

    async def rows(self, ledger: Ledger) -> Rows:
        request_id = ledger.request_id

        async def read(session: AsyncSession) -> Rows:
            log = await session.execute(
                select(
                    RequestLogEntry.status, RequestLogEntry.error_code, RequestLogEntry.bytes_sent
                ).where(RequestLogEntry.request_id == request_id)
            )
            usage = await session.execute(
                select(UsageRecord.endpoint, UsageRecord.units, UsageRecord.voice_id).where(
                    UsageRecord.request_id == request_id
                )
            )
            return Rows([tuple(r) for r in log], [tuple(r) for r in usage])  # type: ignore[misc]

        return await self.tenants.run(read)


@pytest.fixture
def own_database(tmp_path: Path) -> Iterator[str]:
    # Its own: the commit-failure test adds a trigger to it.
    with fresh_database(tmp_path) as url:
        yield url


@pytest.fixture
def app(tmp_path: Path, own_database: str, engines: Engines) -> tuple[FastAPI, Tenants]:
    settings = make_settings(tmp_path, own_database)
    return create_app(settings, engines), Tenants(settings)


@pytest.fixture
async def harness(app: tuple[FastAPI, Tenants]) -> AsyncIterator[Harness]:
    application, tenants = app
    async with running(application):
        context: AppContext = application.state.context
        books = context.books
        yield Harness(books, tenants, await tenants.create())


async def test_a_success_bills_its_charge_with_its_row(harness: Harness) -> None:
    ledger = await harness.ledger()
    await ledger.bill(CHARGE)
    await ledger.answered(200)  # the response starting later writes nothing more
    assert await harness.rows(ledger) == Rows(
        [(200, None, None)], [("text-to-speech", 12, "voice_en_joe")]
    )


async def test_a_success_commits_its_own_writes_with_its_rows(harness: Harness) -> None:
    ledger = await harness.ledger(path="/api/v1/voices/clone")
    voice = Voice(
        id="voice_ledger",
        org_id=harness.tenant.org_id,
        type="cloned",
        name="Mine",
        engine_voice="joe",
        consent="true",
    )
    async with ledger.billed(Charge("voices/clone", 1, voice.id), status=201) as session:
        session.add(voice)
    assert await harness.rows(ledger) == Rows([(201, None, None)], [("voices/clone", 1, voice.id)])
    assert await harness.tenants.run(lambda s: s.get(Voice, voice.id)) is not None


async def test_a_failure_inside_the_success_commits_nothing(harness: Harness) -> None:
    ledger = await harness.ledger()
    with pytest.raises(RuntimeError):
        async with ledger.billed(CHARGE):
            raise RuntimeError("the success's own write failed")
    assert not ledger.settled
    await ledger.refused(ProviderError())  # what the middleware then answers
    assert await harness.rows(ledger) == Rows([(502, "PROVIDER_ERROR", None)], [])


async def test_an_error_answer_is_logged_once_with_its_code(harness: Harness) -> None:
    ledger = await harness.ledger()
    ledger.failed(InvalidRequest.code)
    await ledger.answered(400)
    await ledger.answered(400)
    assert await harness.rows(ledger) == Rows([(400, "INVALID_REQUEST", None)], [])


async def test_a_client_gone_before_its_answer_is_not_billed(harness: Harness) -> None:
    ledger = await harness.ledger()
    ledger.client_gone.set()
    with pytest.raises(ClientClosedRequest):
        await ledger.bill(CHARGE)
    await ledger.refused(ClientClosedRequest())
    assert await harness.rows(ledger) == Rows([(499, "CLIENT_CLOSED_REQUEST", None)], [])


async def test_a_stream_writes_its_row_when_it_ends_billed_if_all_went_out(
    harness: Harness,
) -> None:
    ledger = await harness.ledger()
    ledger.stream_starting()
    await ledger.answered(200)  # its 200 goes out before its body exists
    assert await harness.rows(ledger) == Rows([], [])
    ledger.client_gone.set()  # after the last byte: not a client leaving early
    await ledger.stream_ended(CHARGE, None, 4096)
    assert await harness.rows(ledger) == Rows(
        [(200, None, 4096)], [("text-to-speech", 12, "voice_en_joe")]
    )


async def test_a_stream_cut_off_is_logged_with_what_it_sent_and_not_billed(
    harness: Harness,
) -> None:
    for outcome in (ProviderError(), ClientClosedRequest()):
        ledger = await harness.ledger()
        ledger.stream_starting()
        await ledger.stream_ended(CHARGE, outcome, 1024)
        assert await harness.rows(ledger) == Rows([(outcome.status, outcome.code, 1024)], [])


async def test_a_stream_whose_commit_fails_is_logged_500(harness: Harness) -> None:
    ledger = await harness.ledger()
    ledger.stream_starting()
    async with refusing_log_rows(harness.tenants, "NEW.status = 200"):
        await ledger.stream_ended(CHARGE, None, 2048)
    assert await harness.rows(ledger) == Rows([(500, "INTERNAL_ERROR", 2048)], [])


async def test_a_request_the_app_never_saw_is_logged_without_a_tenant(harness: Harness) -> None:
    ledger = Ledger(harness.books, "-", "-")
    await ledger.refused(InvalidRequest("Malformed HTTP request."))
    row = await harness.tenants.run(lambda s: s.get(RequestLogEntry, ledger.request_id))
    assert row is not None and (row.org_id, row.status) == (None, 400)
