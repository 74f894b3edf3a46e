"""Receivers that misbehave cost the service nothing it needs: an endless answer is read a
few KiB deep, a dripping one is cut at the attempt's deadline and retried on schedule, and
one organization's slow receivers hold at most its share of the delivery slots, so another
organization's deliveries never wait for them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.helpers.app import Tenant, Tenants, make_settings
from tests.helpers.raw_receivers import (
    Misbehaviour,
    dripping_answer,
    endless_answer,
    raw_receiver,
)
from voice_service.core.models import utcnow
from voice_service.kit.db import transaction
from voice_service.settings import Settings
from voice_service.web.context import AppContext
from voice_service.webhooks.fair_shares import FairShares
from voice_service.webhooks.service import emit
from voice_service.webhooks.worker import CONCURRENCY, ORG_SHARE

pytestmark = pytest.mark.anyio

EVENT = "transcription.completed"
POLLS = 100_000  # a minute's requests: the tests poll deliveries


@pytest.fixture
def settings(tmp_path: Path, own_database: str, request: pytest.FixtureRequest) -> Settings:
    return make_settings(
        tmp_path,
        own_database,
        outbound_allowed_hosts="127.0.0.1",
        webhook_retry_seconds="1",
        webhook_timeout_seconds=getattr(request, "param", 1.5),
    )


@pytest.fixture
async def tenant(tenants: Tenants) -> Tenant:
    return await tenants.create(rate_limit=POLLS)


@pytest.fixture
def endless() -> Iterator[tuple[str, Misbehaviour]]:
    seen = Misbehaviour()
    with raw_receiver(endless_answer(seen), seen) as port:
        yield f"http://127.0.0.1:{port}/hooks", seen


@pytest.fixture
def dripping() -> Iterator[tuple[str, Misbehaviour]]:
    seen = Misbehaviour()
    with raw_receiver(dripping_answer(seen, interval=0.5), seen) as port:
        yield f"http://127.0.0.1:{port}/hooks", seen


async def register(client: httpx.AsyncClient, tenant: Tenant, url: str) -> str:
    made = await client.post(
        "/webhooks", headers=tenant.headers, json={"url": url, "events": [EVENT]}
    )
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


async def tell(app: FastAPI, tenant: Tenant) -> list[str]:
    """An event for the organization's webhooks, as a job's end emits it."""
    context: AppContext = app.state.context
    assert context.deliveries is not None
    async with transaction(context.sessions) as session:
        return await emit(
            session, context.deliveries.queue, tenant.org_id, EVENT, {"id": "job_x"}, utcnow()
        )


async def delivery(client: httpx.AsyncClient, tenant: Tenant, hook: str) -> dict[str, Any]:
    answer = await client.get(f"/webhooks/{hook}/deliveries", headers=tenant.headers)
    (only,) = answer.json()["deliveries"]
    return dict(only)


async def ended(
    client: httpx.AsyncClient, tenant: Tenant, hook: str, seconds: float = 60
) -> dict[str, Any]:
    async with asyncio.timeout(seconds):
        while True:
            found = await delivery(client, tenant, hook)
            if found["status"] != "pending":
                return found
            await asyncio.sleep(0.1)


async def told_once(
    client: httpx.AsyncClient, tenant: Tenant, app: FastAPI, url: str
) -> dict[str, Any]:
    """A webhook to `url`, told of one event: its delivery once it has ended."""
    hook = await register(client, tenant, url)
    await tell(app, tenant)
    return await ended(client, tenant, hook)


def shares(app: FastAPI) -> FairShares:
    context: AppContext = app.state.context
    assert context.deliveries is not None
    return context.deliveries.shares


async def test_an_endless_answer_is_read_a_few_kib_deep_and_delivered(
    client: httpx.AsyncClient, tenant: Tenant, app: FastAPI, endless: tuple[str, Misbehaviour]
) -> None:
    url, seen = endless
    done = await told_once(client, tenant, app, url)
    assert done["status"] == "delivered"
    assert [a["status_code"] for a in done["attempts"]] == [200]
    # What the receiver got out before the service hung up: the sockets' buffers, not 2 GiB.
    assert seen.connections == 1 and seen.sent < 64 * 1024**2


async def test_a_dripping_answer_is_cut_at_the_deadline_and_retried_on_schedule(
    client: httpx.AsyncClient, tenant: Tenant, app: FastAPI, dripping: tuple[str, Misbehaviour]
) -> None:
    url, seen = dripping
    done = await told_once(client, tenant, app, url)
    assert done["status"] == "failed"  # both attempts of the schedule "1"
    assert [a["status_code"] for a in done["attempts"]] == [None, None]
    assert all(a["error"].startswith("timeout") for a in done["attempts"])
    assert seen.connections == 2


@pytest.mark.parametrize("settings", [30.0], indirect=True)
async def test_one_organizations_slow_receivers_never_hold_anothers_deliveries(
    client: httpx.AsyncClient,
    tenants: Tenants,
    app: FastAPI,
    dripping: tuple[str, Misbehaviour],
) -> None:
    url, _ = dripping
    slow = await tenants.create(rate_limit=POLLS)
    other = await tenants.create(rate_limit=POLLS)
    # One receiver more than the process has slots, as the tester had.
    slow_hooks = [await register(client, slow, f"{url}/{n}") for n in range(CONCURRENCY + 1)]
    await tell(app, slow)
    counters = shares(app)
    async with asyncio.timeout(60):  # it holds every slot it may, and wants more
        while not counters.deferred[slow.org_id] and counters.held[slow.org_id] < CONCURRENCY:  # noqa: ASYNC110 (another task's counters)
            await asyncio.sleep(0.05)

    fast = Misbehaviour()
    with raw_receiver(dripping_answer(fast, interval=0), fast) as port:
        hook = await register(client, other, f"http://127.0.0.1:{port}/hooks")
        await tell(app, other)
        done = await ended(client, other, hook)
    assert done["status"] == "delivered"
    # Delivered while the slow receivers' first attempts were all still under way.
    for slow_hook in slow_hooks:
        assert (await delivery(client, slow, slow_hook))["attempts"] == []
    assert counters.deferred[other.org_id] == 0  # never put off for want of a slot
    assert counters.peak[slow.org_id] == ORG_SHARE
