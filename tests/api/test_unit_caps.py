"""Monthly unit caps on keys and organizations: refused before any work with 429, never
billed past, under concurrency on two nodes, by the calendar month."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from tests.helpers.api import assert_error, speak, transcribe, usage_units
from tests.helpers.app import Tenant, Tenants, running
from tests.helpers.wav import silent_wav
from voice_service.app import create_app
from voice_service.books.ledger import Ledger
from voice_service.books.usage.caps import HOLD_LIFETIME
from voice_service.books.usage.charge import Charge
from voice_service.core.errors import ProviderError, RateLimited
from voice_service.core.models import RequestLogEntry, UnitHold, UsageRecord
from voice_service.inference.engines import Engines
from voice_service.settings import Settings
from voice_service.tenancy.principal import principal_for_key
from voice_service.tenancy.service import set_org_cap
from voice_service.web.context import AppContext

pytestmark = pytest.mark.anyio

HELLO = "Hello."  # 6 units


async def log_row(tenants: Tenants, request_id: str) -> tuple[int, str | None]:
    row = await tenants.run(lambda s: s.get(RequestLogEntry, request_id))
    assert row is not None
    return row.status, row.error_code


async def test_a_key_cap_refuses_the_request_that_would_pass_it(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    capped = await tenants.add_key(tenant, monthly_units=20)
    for remaining in (14, 8, 2):
        served = await speak(client, capped, HELLO)
        assert served.status_code == 200, served.text
        assert served.headers["X-Units-Remaining"] == str(remaining)
    sent = datetime.now(UTC)
    refused = await speak(client, capped, HELLO)
    answered = datetime.now(UTC)
    error = assert_error(refused, 429, "RATE_LIMITED")
    assert error["message"] == (
        "The monthly cap of 20 units for this API key would be passed: 2 left this month, "
        "this request needs 6."
    )
    assert refused.headers["X-Units-Remaining"] == "2"
    # The server read its clock between `sent` and `answered`, and rounds up to whole seconds.
    next_month = (sent.replace(day=28) + timedelta(days=4)).replace(
        day=1, hour=0, minute=0, second=0, microsecond=0
    )
    retry_after = int(refused.headers["Retry-After"])
    assert (next_month - answered).total_seconds() <= retry_after
    assert retry_after <= math.ceil((next_month - sent).total_seconds())
    assert await log_row(tenants, error["request_id"]) == (429, "RATE_LIMITED")
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", 6)] * 3

    # What is left still passes; the organization's other keys have no cap.
    assert (await speak(client, capped, "Hi")).headers["X-Units-Remaining"] == "0"
    uncapped = await speak(client, tenant, HELLO)
    assert uncapped.status_code == 200 and "X-Units-Remaining" not in uncapped.headers


async def test_an_organization_cap_covers_all_its_keys_and_transcriptions(
    client: httpx.AsyncClient, tenants: Tenants
) -> None:
    tenant = await tenants.create()
    await tenants.run(lambda s: set_org_cap(s, tenant.org_id, 5))
    other_key = await tenants.add_key(tenant)
    three_seconds = silent_wav(48000, 16000)
    served = await transcribe(client, tenant, three_seconds, language="en")
    assert served.status_code == 200, served.text
    assert served.headers["X-Units-Remaining"] == "2"
    refused = await transcribe(client, other_key, three_seconds, language="en")
    error = assert_error(refused, 429, "RATE_LIMITED")
    assert "cap of 5 units for this organization" in error["message"]
    assert await usage_units(tenants, tenant.org_id) == [("speech-to-text", 3)]


async def test_openai_clients_get_the_cap_in_their_error_shape(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    capped = await tenants.add_key(tenant, monthly_units=3)
    refused = await client.post(
        "http://testserver/v1/audio/speech",
        headers=capped.headers,
        json={"model": "tts-1", "voice": "alloy", "input": HELLO},
    )
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert (error["type"], error["code"]) == ("rate_limit_error", "rate_limited")
    assert "monthly cap of 3 units" in error["message"]


@pytest.fixture
async def second_node(settings: Settings, engines: Engines) -> AsyncIterator[httpx.AsyncClient]:
    async with running(create_app(settings, engines)) as client:
        yield client


async def test_the_last_units_raced_on_two_nodes_are_billed_once(
    client: httpx.AsyncClient,
    second_node: httpx.AsyncClient,
    tenants: Tenants,
    tenant: Tenant,
) -> None:
    capped = await tenants.add_key(tenant, monthly_units=20)
    nodes = [client, second_node] * 4
    answers = await asyncio.gather(*(speak(node, capped, HELLO) for node in nodes))
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses == [200] * 3 + [429] * 5
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", 6)] * 3
    holds = await tenants.run(lambda s: s.scalar(select(func.count()).select_from(UnitHold)))
    assert holds == 0


# --- the month and the holds, on the ledger with its clock set -----------------------------

END_OF_NOVEMBER = datetime(2026, 11, 30, 23, 59, 50, tzinfo=UTC)


@pytest.fixture
async def app_context(app: FastAPI) -> AsyncIterator[AppContext]:
    async with running(app):
        yield app.state.context


async def capped_ledger(
    context: AppContext, tenants: Tenants, tenant: Tenant, now: datetime
) -> Ledger:
    books = replace(context.books, clock=lambda: now)
    ledger = Ledger(books, "POST", "/api/v1/text-to-speech")
    principal = await tenants.run(lambda s: principal_for_key(s, tenant.key_id))
    assert principal is not None and principal.capped
    ledger.admit(principal)
    return ledger


async def add_usage(tenants: Tenants, tenant: Tenant, units: int, when: datetime) -> None:
    async def add(session: AsyncSession) -> None:
        session.add(
            UsageRecord(
                request_id=f"req_{when.timestamp():.0f}_{units}",
                org_id=tenant.org_id,
                key_id=tenant.key_id,
                endpoint="text-to-speech",
                units=units,
                created_at=when,
            )
        )

    await tenants.run(add)


async def test_the_cap_counts_this_month_and_retries_when_it_turns(
    app_context: AppContext, tenants: Tenants
) -> None:
    tenant = await tenants.create()
    await tenants.run(lambda s: set_org_cap(s, tenant.org_id, 20))
    await add_usage(tenants, tenant, 100, datetime(2026, 10, 31, 23, 0, tzinfo=UTC))
    await add_usage(tenants, tenant, 15, datetime(2026, 11, 1, 0, 0, tzinfo=UTC))

    ledger = await capped_ledger(app_context, tenants, tenant, END_OF_NOVEMBER)
    with pytest.raises(RateLimited) as refused:
        await ledger.hold(6)
    assert refused.value.headers["Retry-After"] == "10"  # until December starts
    assert refused.value.headers["X-Units-Remaining"] == "5"

    december = await capped_ledger(
        app_context, tenants, tenant, datetime(2026, 12, 1, 0, 0, 1, tzinfo=UTC)
    )
    await december.hold(6)
    assert december.units_remaining == 14


async def test_a_hold_counts_until_billed_or_dropped_and_a_crash_s_expires(
    app_context: AppContext, tenants: Tenants
) -> None:
    tenant = await tenants.create()
    await tenants.run(lambda s: set_org_cap(s, tenant.org_id, 20))
    now = END_OF_NOVEMBER - timedelta(days=1)

    async def hold_left_by_a_crash(session: AsyncSession) -> None:
        session.add(
            UnitHold(
                request_id="req_crashed",
                org_id=tenant.org_id,
                key_id=tenant.key_id,
                units=20,
                created_at=now - HOLD_LIFETIME - timedelta(seconds=1),
            )
        )

    await tenants.run(hold_left_by_a_crash)
    billed = await capped_ledger(app_context, tenants, tenant, now)
    await billed.hold(12)  # the crashed request's hold no longer counts
    failed = await capped_ledger(app_context, tenants, tenant, now)
    with pytest.raises(RateLimited):
        await failed.hold(12)  # the first hold counts while its request runs
    await failed.hold(8)
    await failed.refused(ProviderError())  # not billed: its hold is dropped
    await billed.bill(Charge("text-to-speech", 12))
    third = await capped_ledger(app_context, tenants, tenant, now)
    await third.hold(8)
    assert third.units_remaining == 0
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", 12)]
    holds = await tenants.run(
        lambda s: s.scalars(select(UnitHold.request_id).where(UnitHold.org_id == tenant.org_id))
    )
    assert list(holds) == [third.request_id]
