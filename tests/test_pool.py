"""The inference pool runs generators: one slot while items flow, one item ahead at most."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator

import pytest

from voice_service.admission import Capability, Job
from voice_service.metrics.registry import Metrics
from voice_service.pool import InferencePool

pytestmark = pytest.mark.anyio

SPEECH = Job(Capability.TEXT_TO_SPEECH, "piper")


def one_slot_pool() -> InferencePool:
    """One worker, and room for one request to wait for it."""
    return InferencePool(
        1, queue_timeout=5, max_queued=1, metrics=Metrics(org_labels=False, shared_directory=None)
    )


class Counting:
    def __init__(self) -> None:
        self.made = 0
        self.closed = threading.Event()

    def items(self, count: int) -> Iterator[int]:
        try:
            for index in range(count):
                self.made += 1
                yield index
        finally:
            self.closed.set()


async def until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    async with asyncio.timeout(seconds):
        while not condition():  # noqa: ASYNC110 (state changed by the pool's threads)
            await asyncio.sleep(0.01)


async def test_a_slow_reader_holds_the_generator_one_item_ahead() -> None:
    pool = one_slot_pool()
    source = Counting()
    items = pool.stream(SPEECH, source.items, 100)
    assert await anext(items) == 0
    await until(lambda: source.made >= 2)  # the next item is made while this one is used
    await asyncio.sleep(0.2)  # the reader dawdles: a chance to run ahead, not taken
    assert source.made == 2
    assert pool.in_use == 1
    await items.aclose()
    await until(lambda: pool.in_use == 0)
    assert source.closed.is_set()  # closed between items, then the slot freed
    pool.shutdown()


async def test_all_items_in_order_then_the_slot_is_free() -> None:
    pool = one_slot_pool()
    source = Counting()
    assert [item async for item in pool.stream(SPEECH, source.items, 5)] == [0, 1, 2, 3, 4]
    await until(lambda: pool.in_use == 0)
    pool.shutdown()


async def test_a_second_stream_waits_for_the_slot() -> None:
    pool = one_slot_pool()
    first = pool.stream(SPEECH, Counting().items, 10)
    await anext(first)
    second = asyncio.ensure_future(anext(pool.stream(SPEECH, Counting().items, 10)))
    await asyncio.sleep(0.2)
    assert not second.done()  # one slot, held by the first stream
    await first.aclose()
    assert await second == 0
    pool.shutdown()
