"""Admission control: a capability's full queue refuses at once with Retry-After, in both
APIs, unbilled and logged; other capabilities still queue; /readyz shows the queues.

The pool is made busy with jobs that block on an Event the test holds, so every outcome is
decided by the pool's state, never by how fast the machine is."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
from fastapi import FastAPI
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from tests.helpers.api import assert_error
from tests.helpers.app import Tenant, Tenants, running
from tests.helpers.voices import JOE
from voice_service.app import create_app
from voice_service.core.errors import NodeBusy
from voice_service.core.models import RequestLogEntry, UsageRecord
from voice_service.core.vocabulary import Capability
from voice_service.inference.admission import CapabilityQueue, Job
from voice_service.inference.engines import Engines
from voice_service.inference.pool import InferencePool
from voice_service.kit.metrics.registry import Metrics
from voice_service.settings import Settings
from voice_service.web.context import AppContext

pytestmark = pytest.mark.anyio

SPEECH = Job(Capability.TEXT_TO_SPEECH, "piper")
TRANSCRIPTION = Job(Capability.SPEECH_TO_TEXT, "whisper")
# Longer than any test runs: a request that queued instead of being refused would hang
# (and fail on the suite's guard) rather than pass by luck.
NEVER = 3600.0


@dataclass
class Blockers:
    """Jobs in a pool that run until the test releases them."""

    pool: InferencePool
    release: threading.Event = field(default_factory=threading.Event)
    jobs: list[asyncio.Future[bool]] = field(default_factory=list)

    def submit(self, job: Job) -> None:
        self.jobs.append(asyncio.ensure_future(self.pool.run(job, self.release.wait)))

    async def finish(self) -> None:
        self.release.set()
        assert all(await asyncio.gather(*self.jobs))


async def until(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    async with asyncio.timeout(seconds):
        while not condition():  # noqa: ASYNC110 (state changed by the pool's tasks)
            await asyncio.sleep(0.01)


def queued(pool: InferencePool, capability: Capability) -> tuple[int, int]:
    queue = pool.queues()[capability]
    return queue["waiting"], queue["running"]


@pytest.fixture
async def pool() -> AsyncIterator[InferencePool]:
    metrics = Metrics(org_labels=False, shared_directory=None)
    pool = InferencePool(1, queue_timeout=NEVER, max_queued=1, metrics=metrics)
    yield pool
    pool.shutdown()


async def test_a_full_queue_refuses_the_next_request_at_once(pool: InferencePool) -> None:
    blockers = Blockers(pool)
    blockers.submit(SPEECH)  # holds the one slot
    blockers.submit(SPEECH)  # waits: the queue's one place
    await until(lambda: queued(pool, Capability.TEXT_TO_SPEECH) == (1, 1))
    with pytest.raises(NodeBusy) as refused:
        await pool.run(SPEECH, blockers.release.wait)
    assert int(refused.value.headers["Retry-After"]) >= 1
    assert "safe to retry" in refused.value.message
    await blockers.finish()  # the queued job still ran
    assert queued(pool, Capability.TEXT_TO_SPEECH) == (0, 0)


async def test_another_capability_still_queues(pool: InferencePool) -> None:
    blockers = Blockers(pool)
    blockers.submit(SPEECH)
    blockers.submit(SPEECH)
    await until(lambda: queued(pool, Capability.TEXT_TO_SPEECH) == (1, 1))
    blockers.submit(TRANSCRIPTION)  # its own queue is empty: it waits, it is not refused
    await until(lambda: queued(pool, Capability.SPEECH_TO_TEXT) == (1, 0))
    await blockers.finish()


async def test_a_free_slot_admits_whatever_the_bound() -> None:
    metrics = Metrics(org_labels=False, shared_directory=None)
    pool = InferencePool(1, queue_timeout=NEVER, max_queued=0, metrics=metrics)
    assert await pool.run(SPEECH, lambda: "spoken") == "spoken"
    pool.shutdown()


def test_retry_after_counts_the_queue_and_this_request_over_the_slots() -> None:
    queue = CapabilityQueue(waiting=2)
    assert queue.retry_after(slots=2) == 1  # nothing measured yet
    queue.finished(4.0)
    assert queue.retry_after(slots=2) == 6  # (2 waiting + this one) x 4 s / 2 slots
    queue.finished(9.0)  # the running mean moves a fifth of the way: 5 s
    assert queue.retry_after(slots=2) == 8  # ceil(3 x 5 / 2)
    assert CapabilityQueue(waiting=0, mean_seconds=0.01).retry_after(slots=4) == 1


# --- through the app ------------------------------------------------------------------------


@pytest.fixture
async def busy_app(settings: Settings, engines: Engines) -> FastAPI:
    """One worker, and no room to wait for it."""
    return create_app(
        settings.model_copy(update={"pool_size": 1, "max_queued_per_capability": 0}), engines
    )


def context_of(app: FastAPI) -> AppContext:
    context: AppContext = app.state.context
    return context


async def rows_of(tenants: Tenants, tenant: Tenant) -> tuple[list[tuple[int, str | None]], int]:
    """The organization's request-log (status, error code) and its count of usage rows."""

    async def work(session: AsyncSession) -> tuple[list[tuple[int, str | None]], int]:
        logged = await session.execute(
            select(RequestLogEntry.status, RequestLogEntry.error_code).where(
                RequestLogEntry.org_id == tenant.org_id
            )
        )
        billed = await session.scalar(
            select(func.count()).select_from(UsageRecord).where(UsageRecord.org_id == tenant.org_id)
        )
        return [(status, code) for status, code in logged.all()], int(billed or 0)

    return await tenants.run(work)


async def test_a_busy_node_answers_502_with_retry_after_on_both_apis_and_bills_nothing(
    busy_app: FastAPI, tenants: Tenants
) -> None:
    async with running(busy_app) as client:
        tenant = await tenants.create()
        pool = context_of(busy_app).pool
        blockers = Blockers(pool)
        blockers.submit(SPEECH)
        await until(lambda: queued(pool, Capability.TEXT_TO_SPEECH) == (0, 1))
        ready = (await client.get("http://testserver/readyz")).json()
        assert ready["queues"]["text-to-speech"] == {"waiting": 0, "running": 1}
        assert ready["queues"]["speech-to-text"] == {"waiting": 0, "running": 0}

        native = await client.post(
            "/text-to-speech", headers=tenant.headers, json={"text": "Hi.", "voice_id": JOE}
        )
        error = assert_error(native, 502, "PROVIDER_ERROR")
        assert "busy" in error["message"]
        assert "safe to retry" in error["message"]
        assert int(native.headers["retry-after"]) >= 1

        openai = await client.post(
            "http://testserver/v1/audio/speech",
            headers=tenant.headers,
            json={"model": "tts-1", "voice": "alloy", "input": "Hi."},
        )
        assert openai.status_code == 502
        assert openai.json()["error"]["type"] == "server_error"
        assert "busy" in openai.json()["error"]["message"]
        assert int(openai.headers["retry-after"]) >= 1
        metrics = (await client.get("http://testserver/metrics")).text
        assert 'voice_service_inference_rejected_total{capability="text-to-speech"} 2.0' in metrics
        await blockers.finish()
    logged, billed = await rows_of(tenants, tenant)
    assert logged == [(502, "PROVIDER_ERROR"), (502, "PROVIDER_ERROR")]
    assert billed == 0
