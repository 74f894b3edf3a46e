"""Choosing a replica: fewest in flight, at most `max_concurrency` each, a bounded queue,
and replicas left out after five failures in a row until one trial brings them back."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

import pytest

from voice_service.core.errors import NodeBusy
from voice_service.inference.providers.replicas import (
    FAILURES_TO_LEAVE_OUT,
    LEFT_OUT_SECONDS,
    NoReplica,
    ReplicaSet,
    ReplicaState,
)

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _set(replicas: int = 2, max_concurrency: int = 2, max_queued: int = 1) -> ReplicaSet:
    return ReplicaSet(
        tuple(f"http://10.0.0.{n}/v1" for n in range(replicas)),
        max_concurrency,
        max_queued,
        clock=Clock(),
    )


async def test_requests_spread_by_fewest_in_flight() -> None:
    replicas = _set()
    async with AsyncExitStack() as held:
        chosen = [await held.enter_async_context(replicas.replica()) for _ in range(4)]
        assert [replicas.replicas.index(r) for r in chosen] == [0, 1, 0, 1]
        assert [r.in_flight for r in replicas.replicas] == [2, 2]
    assert [r.in_flight for r in replicas.replicas] == [0, 0]


async def test_a_full_set_queues_one_and_refuses_the_next_with_retry_after() -> None:
    replicas = _set(replicas=1, max_concurrency=1, max_queued=1)
    async with replicas.replica():
        waiting = asyncio.ensure_future(_hold(replicas))
        await asyncio.sleep(0)  # it queues
        assert replicas.queue.waiting == 1
        with pytest.raises(NodeBusy) as refused:
            async with replicas.replica():
                pass
        assert refused.value.headers == {"Retry-After": "1"}
    assert await waiting == 0  # it got the replica once the first was done


async def test_five_failures_in_a_row_leave_a_replica_out_until_one_trial() -> None:
    replicas = _set()
    clock = replicas.clock
    assert isinstance(clock, Clock)
    first, second = replicas.replicas
    for attempt in range(FAILURES_TO_LEAVE_OUT):
        assert first.state(clock.now) is (ReplicaState.FAILING if attempt else ReplicaState.UP)
        replicas.failed(first)
    assert first.state(clock.now) is ReplicaState.LEFT_OUT
    for _ in range(3):  # everything goes to the other one
        async with replicas.replica() as chosen:
            assert chosen is second
    clock.now += LEFT_OUT_SECONDS
    async with replicas.replica() as trial:
        assert trial is first
        async with replicas.replica() as other:  # one trial at a time
            assert other is second
        replicas.failed(trial)  # a failed trial: out for the full time again
    assert first.state(clock.now) is ReplicaState.LEFT_OUT
    clock.now += LEFT_OUT_SECONDS
    async with replicas.replica() as trial:
        replicas.succeeded(trial)
    assert first.state(clock.now) is ReplicaState.UP


async def test_with_every_replica_left_out_there_is_none_to_wait_for() -> None:
    replicas = _set(replicas=1)
    for _ in range(FAILURES_TO_LEAVE_OUT):
        replicas.failed(replicas.replicas[0])
    assert not replicas.can_serve
    with pytest.raises(NoReplica):
        async with replicas.replica():
            pass
    # A retry never goes back to the replica that just failed.
    fresh = _set(replicas=1)
    with pytest.raises(NoReplica):
        async with fresh.replica(exclude=fresh.replicas[0]):
            pass


async def test_credentials_never_show() -> None:
    replicas = ReplicaSet(("https://user:secret@gpu.example:8443/v1",), 1, 1)
    assert replicas.replicas[0].shown_url == "https://gpu.example:8443/v1"


async def _hold(replicas: ReplicaSet) -> int:
    async with replicas.replica() as replica:
        return replicas.replicas.index(replica)
