"""The inference pool runs work a step at a time, each step on a slot of its own: a caller
that stops asking holds no worker, a free slot goes to live turns, then first steps, then
later ones, one job alone spreads its parts over every free worker, and a job whose client
has left stops (or never starts)."""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TypeVar

import pytest
import scipy.linalg
from threadpoolctl import threadpool_info, threadpool_limits

from tests.helpers.inference import slots_held
from voice_service.core.errors import ClientClosedRequest
from voice_service.core.vocabulary import Capability
from voice_service.engines.protocols import EngineError
from voice_service.inference.admission import Job
from voice_service.inference.pool import InferencePool
from voice_service.kit.metrics.registry import Metrics

pytestmark = pytest.mark.anyio

T = TypeVar("T")

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
    await until(lambda: slots_held(pool) == 0)  # and its slot given back once it is made
    await asyncio.sleep(0.2)  # the reader dawdles: a chance to run ahead, not taken
    assert source.made == 2
    assert slots_held(pool) == 0
    await items.aclose()
    await until(source.closed.is_set)  # closed between items
    pool.shutdown()


async def test_all_items_in_order_then_the_slot_is_free() -> None:
    pool = one_slot_pool()
    source = Counting()
    assert [item async for item in pool.stream(SPEECH, source.items, 5)] == [0, 1, 2, 3, 4]
    await until(lambda: slots_held(pool) == 0)
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
    await until(lambda: slots_held(pool) == 0)
    pool.shutdown()


async def test_live_turns_then_first_steps_then_later_steps() -> None:
    pool = one_slot_pool()
    log: list[str] = []
    gates = [threading.Event(), threading.Event()]

    def gated(count: int) -> Iterator[int]:
        for index in range(count):
            gates[min(index, 1)].wait(10)
            log.append(f"item {index}")
            yield index

    items = pool.stream(SPEECH, gated, 2)  # two: a third would be made ahead, racing the log
    first = asyncio.ensure_future(anext(items))  # item 0 is being made, on the only slot
    await until(lambda: slots_held(pool) == 1)
    blocker = asyncio.ensure_future(pool.run(SPEECH, gates[1].wait, 10))
    await until(lambda: waiting(pool) == 1)
    gates[0].set()
    assert await first == 0  # the slot went to the blocker, which holds it
    second = asyncio.ensure_future(anext(items))  # item 1 waits in line: a later step
    await until(lambda: waiting(pool) == 1)
    new = asyncio.ensure_future(pool.run(SPEECH, log.append, "new job"))
    await until(lambda: waiting(pool) == 2)
    live_job = Job(Capability.SPEECH_TO_TEXT, "whisper", live=True)
    live = asyncio.ensure_future(pool.run(live_job, log.append, "live turn"))
    await until(lambda: pool.queues()[Capability.SPEECH_TO_TEXT]["waiting"] == 1)
    gates[1].set()  # the blocker ends: its slot goes to the most urgent step waiting
    await asyncio.gather(blocker, new, live)
    assert await second == 1
    assert log == ["item 0", "live turn", "new job", "item 1"]
    await items.aclose()
    pool.shutdown()


def two_slot_pool() -> InferencePool:
    return InferencePool(
        2, queue_timeout=30, max_queued=8, metrics=Metrics(org_labels=False, shared_directory=None)
    )


async def test_one_job_alone_spreads_its_parts_over_every_free_worker() -> None:
    pool = two_slot_pool()
    together = threading.Barrier(2, timeout=10)  # broken unless two parts run at once

    def part(index: int) -> int:
        if index < 2:
            together.wait()
        return index

    parts = [functools.partial(part, index) for index in range(4)]
    made = pool.in_order(SPEECH, parts, lambda index: f"part {index}", lambda: "end")
    assert await collect_all(made) == ["part 0", "part 1", "part 2", "part 3", "end"]
    await until(lambda: slots_held(pool) == 0)
    pool.shutdown()


async def test_parts_made_out_of_order_are_emitted_in_order_one_at_a_time() -> None:
    pool = two_slot_pool()
    first_may_end = threading.Event()
    emitting = threading.Lock()
    emitted: list[int] = []

    def part(index: int) -> int:
        if index == 0:
            first_may_end.wait(10)  # part 1 is made first
        else:
            first_may_end.set()
        return index

    def emit(index: int) -> int:
        assert emitting.acquire(blocking=False), "two emits at once"
        try:
            emitted.append(index)
            return index
        finally:
            emitting.release()

    parts = [functools.partial(part, index) for index in range(6)]
    assert await collect_all(pool.in_order(SPEECH, parts, emit, lambda: -1)) == [
        0,
        1,
        2,
        3,
        4,
        5,
        -1,
    ]
    assert emitted == [0, 1, 2, 3, 4, 5]
    pool.shutdown()


async def test_under_load_a_jobs_next_part_waits_in_line_for_its_slot() -> None:
    pool = two_slot_pool()
    log: list[str] = []
    release = threading.Event()
    blocker = asyncio.ensure_future(pool.run(SPEECH, release.wait, 10))
    await until(lambda: slots_held(pool) == 1)
    gate = threading.Event()

    def part(index: int) -> int:
        if index == 0:
            gate.wait(10)
        log.append(f"part {index}")
        return index

    parts = [functools.partial(part, i) for i in range(2)]
    made = pool.in_order(SPEECH, parts, str, lambda: "end")
    first = asyncio.ensure_future(anext(made))
    await until(lambda: slots_held(pool) == 2)  # part 0 on the free worker; no room for part 1
    newcomers = [asyncio.ensure_future(pool.run(SPEECH, log.append, f"new {n}")) for n in range(2)]
    await until(lambda: waiting(pool) == 2)
    gate.set()  # part 0's worker goes to the newcomers, not on to part 1
    assert await first == "0"
    await asyncio.gather(*newcomers)
    release.set()
    assert await collect_all(made) == ["1", "end"]
    await blocker
    assert log == ["part 0", "new 0", "new 1", "part 1"]
    pool.shutdown()


async def test_parts_run_at_most_two_per_worker_ahead_of_the_caller() -> None:
    pool = two_slot_pool()
    made_parts: list[int] = []  # appended from two threads: list.append is atomic

    def part(index: int) -> int:
        made_parts.append(index)
        return index

    made = pool.in_order(SPEECH, [functools.partial(part, i) for i in range(9)], str, lambda: "")
    assert await anext(made) == "0"
    await until(lambda: len(made_parts) >= 5 and slots_held(pool) == 0)
    await asyncio.sleep(0.2)  # a dawdling caller: a chance to run further ahead, not taken
    assert sorted(made_parts) == [0, 1, 2, 3, 4]  # four ahead of the one taken
    await made.aclose()
    pool.shutdown()


async def test_a_part_that_fails_fails_the_job_after_the_parts_before_it() -> None:
    pool = two_slot_pool()

    def part(index: int) -> int:
        if index == 2:
            raise EngineError("part 2")
        return index

    made = pool.in_order(SPEECH, [functools.partial(part, i) for i in range(5)], str, lambda: "")
    assert await anext(made) == "0"
    assert await anext(made) == "1"
    with pytest.raises(EngineError, match="part 2"):
        await anext(made)
    await until(lambda: slots_held(pool) == 0)
    pool.shutdown()


async def test_a_job_with_no_parts_only_finishes() -> None:
    pool = two_slot_pool()
    assert await collect_all(pool.in_order(SPEECH, [], str, lambda: "end")) == ["end"]
    await until(lambda: slots_held(pool) == 0)
    pool.shutdown()


async def collect_all(items: AsyncIterator[T]) -> list[T]:
    return [item async for item in items]


async def test_a_job_whose_client_left_while_it_waited_never_runs() -> None:
    pool = one_slot_pool()
    release = threading.Event()
    blocker = asyncio.ensure_future(pool.run(SPEECH, release.wait))
    await until(lambda: slots_held(pool) == 1)
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
    assert slots_held(pool) == 0
    pool.shutdown()


async def test_numpy_and_scipy_blas_stay_on_the_steps_thread() -> None:
    """BLAS threads of their own would spin, between a step's small products, on the cores
    that concurrent steps need."""
    assert scipy.linalg.blas  # SciPy's BLAS is loaded, as the diarizer's clustering loads it
    threadpool_limits(limits=2, user_api="blas")
    one_slot_pool()
    blas = [info for info in threadpool_info() if info["user_api"] == "blas"]
    assert len(blas) >= 2
    assert {info["num_threads"] for info in blas} == {1}
