"""The inference pool runs generators a step at a time, one item ahead at most: a caller
that keeps up keeps its worker, one that stops asking holds none and gets one again before
new jobs do, and a job whose client has left stops (or never starts)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from voice_service.admission import Job
from voice_service.errors import ClientClosedRequest
from voice_service.metrics.registry import Metrics
from voice_service.pool import InferencePool
from voice_service.vocabulary import Capability

pytestmark = pytest.mark.anyio

SPEECH = Job(Capability.TEXT_TO_SPEECH, "piper")


def one_slot_pool() -> InferencePool:
    """One worker, and room for two requests to wait for it."""
    return InferencePool(
        1, queue_timeout=30, max_queued=2, metrics=Metrics(org_labels=False, shared_directory=None)
    )


class Counting:
    def __init__(self, log: list[str] | None = None) -> None:
        self.made = 0
        self.closed = threading.Event()
        self.log = log if log is not None else []

    def items(self, count: int) -> Iterator[int]:
        try:
            for index in range(count):
                self.made += 1
                self.log.append(f"item {index}")
                yield index
        finally:
            self.closed.set()


async def until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    async with asyncio.timeout(seconds):
        while not condition():  # noqa: ASYNC110 (state changed by the pool's threads)
            await asyncio.sleep(0.01)


async def drain(items: AsyncIterator[int]) -> None:
    async for _ in items:
        pass


async def collect(items: AsyncIterator[int]) -> list[int]:
    return [item async for item in items]


def range_of(count: int) -> Iterator[int]:
    yield from range(count)


def waiting(pool: InferencePool) -> int:
    return pool.queues()[Capability.TEXT_TO_SPEECH]["waiting"]


async def test_a_slow_reader_holds_one_item_ahead_and_no_slot() -> None:
    pool = one_slot_pool()
    source = Counting()
    items = pool.stream(SPEECH, source.items, 100)
    assert await anext(items) == 0
    await until(lambda: source.made >= 2)  # the next item is made while this one is used
    await until(lambda: pool.in_use == 0)  # and its slot given back once it is made
    await asyncio.sleep(0.2)  # the reader dawdles: a chance to run ahead, not taken
    assert source.made == 2
    assert pool.in_use == 0
    await items.aclose()
    await until(source.closed.is_set)  # closed between items
    pool.shutdown()


async def test_all_items_in_order_then_the_slot_is_free() -> None:
    pool = one_slot_pool()
    source = Counting()
    assert [item async for item in pool.stream(SPEECH, source.items, 5)] == [0, 1, 2, 3, 4]
    await until(lambda: pool.in_use == 0)
    assert source.closed.is_set()
    pool.shutdown()


async def test_a_second_stream_runs_while_the_first_reader_dawdles() -> None:
    pool = one_slot_pool()
    first = pool.stream(SPEECH, Counting().items, 10)
    assert await anext(first) == 0
    second = pool.stream(SPEECH, Counting().items, 10)
    assert await anext(second) == 0  # one slot, and the first stream does not keep it
    assert await anext(first) == 1
    await first.aclose()
    await second.aclose()
    pool.shutdown()


async def test_many_streams_get_every_item_once_and_in_order() -> None:
    # Instant steps finish while their caller is still waking up: the pool must still make
    # at most one item ahead of what each caller took (a generator nexted from two threads
    # at once raises "generator already executing") and hand over every item once.
    pool = InferencePool(
        2,
        queue_timeout=30,
        max_queued=256,
        metrics=Metrics(org_labels=False, shared_directory=None),
    )

    async def read() -> list[int]:
        return [item async for item in pool.stream(SPEECH, range_of, 12)]

    for _ in range(10):
        assert await asyncio.gather(*(read() for _ in range(128))) == [list(range(12))] * 128
    await until(lambda: pool.in_use == 0)
    pool.shutdown()


async def test_a_caller_that_keeps_up_keeps_its_worker() -> None:
    pool = one_slot_pool()
    log: list[str] = []
    gate = threading.Event()

    def gated(count: int) -> Iterator[int]:
        for index in range(count):
            if index == 1:
                gate.wait()  # item 1 is made only once a new job waits for the slot
            log.append(f"item {index}")
            yield index

    items = pool.stream(SPEECH, gated, 3)
    assert await anext(items) == 0
    rest = asyncio.ensure_future(collect(items))  # asks for each item as soon as it has one
    newcomer = asyncio.ensure_future(pool.run(SPEECH, log.append, "new job"))
    await until(lambda: waiting(pool) == 1)
    gate.set()
    assert await rest == [1, 2]
    await newcomer
    assert log == ["item 0", "item 1", "item 2", "new job"]
    pool.shutdown()


async def test_a_stream_under_way_takes_the_slot_before_a_new_job() -> None:
    pool = one_slot_pool()
    log: list[str] = []
    items = pool.stream(SPEECH, Counting(log).items, 3)
    assert await anext(items) == 0
    await until(lambda: len(log) == 2 and pool.in_use == 0)  # item 1 made ahead
    release = threading.Event()
    blocker = asyncio.ensure_future(pool.run(SPEECH, release.wait))
    await until(lambda: pool.in_use == 1)
    assert await anext(items) == 1  # made already; item 2 now waits for the slot
    await until(lambda: waiting(pool) == 1)
    newcomer = asyncio.ensure_future(pool.run(SPEECH, log.append, "new job"))
    await until(lambda: waiting(pool) == 2)  # the new job asked after the stream's step
    release.set()
    assert await blocker
    await newcomer
    assert log == ["item 0", "item 1", "item 2", "new job"]
    await items.aclose()
    pool.shutdown()


async def test_a_job_whose_client_left_while_it_waited_never_runs() -> None:
    pool = one_slot_pool()
    release = threading.Event()
    blocker = asyncio.ensure_future(pool.run(SPEECH, release.wait))
    await until(lambda: pool.in_use == 1)
    gone = asyncio.Event()
    ran: list[str] = []
    abandoned = Job(Capability.TEXT_TO_SPEECH, "piper", abandoned=gone)
    waiter = asyncio.ensure_future(pool.run(abandoned, ran.append, "ran"))
    await until(lambda: waiting(pool) == 1)
    gone.set()
    with pytest.raises(ClientClosedRequest):
        await waiter
    assert waiting(pool) == 0
    release.set()
    assert await blocker
    assert await pool.run(SPEECH, lambda: "next") == "next"  # the slot was not lost
    assert ran == []
    pool.shutdown()


async def test_a_stream_whose_client_left_stops_at_its_next_step() -> None:
    pool = one_slot_pool()
    gone = asyncio.Event()
    source = Counting()
    items = pool.stream(Job(Capability.TEXT_TO_SPEECH, "piper", abandoned=gone), source.items, 9)
    assert await anext(items) == 0
    assert await anext(items) == 1
    gone.set()
    with pytest.raises(ClientClosedRequest):
        await drain(items)  # at most the one item made ahead still comes
    await until(source.closed.is_set)
    assert source.made <= 3
    assert pool.in_use == 0
    pool.shutdown()
