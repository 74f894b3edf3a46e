"""The bounded worker pool all inference runs in, so the event loop never blocks on a model."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import AsyncGenerator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar, cast

from voice_service.admission import Capability, CapabilityQueue, Job
from voice_service.engines.deadline import InferenceTimeout
from voice_service.engines.protocols import EngineError
from voice_service.errors import NodeBusy, ProviderError
from voice_service.metrics.registry import Metrics

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


# Inference threads run at a lower CPU priority than the event loop: with every core busy
# in a model, the loop still gets the CPU at once to answer light requests (GET /voices),
# while inference alone on the machine loses nothing.
INFERENCE_NICENESS = 10


class InferencePool:
    """N threads (onnxruntime and CTranslate2 release the GIL) behind a queue with a deadline,
    and a bound on each capability's share of that queue.

    A request that finds every slot busy and `max_queued` requests of its capability
    already waiting is refused at once (`NodeBusy`, with a Retry-After from the measured
    job times) rather than left to wait out the deadline; one that queues still waits at
    most `queue_timeout`."""

    def __init__(self, size: int, queue_timeout: float, max_queued: int, metrics: Metrics) -> None:
        self._executor = ThreadPoolExecutor(
            max_workers=size, thread_name_prefix="inference", initializer=_lower_priority
        )
        self._size = size
        self._slots = asyncio.Semaphore(size)
        self._queue_timeout = queue_timeout
        self._max_queued = max_queued
        self._metrics = metrics
        self._queues = {capability: CapabilityQueue() for capability in Capability}

    @property
    def in_use(self) -> int:
        """Jobs holding a slot: running, or just finished in their thread."""
        return sum(queue.running for queue in self._queues.values())

    def queues(self) -> dict[str, dict[str, int]]:
        """Per capability: requests waiting for a slot, and holding one."""
        return {
            capability: {"waiting": queue.waiting, "running": queue.running}
            for capability, queue in self._queues.items()
        }

    async def start_up(self, load: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`load(...)` (the models, at start) in a worker thread: the threads an engine
        starts for itself inherit its lower priority. No request waits yet: no slot taken."""
        return await asyncio.wrap_future(self._executor.submit(load, *args, **kwargs))

    async def run(self, job: Job, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        held = await self._acquire(job)
        loop = asyncio.get_running_loop()
        future = self._executor.submit(held.step, functools.partial(fn, *args, **kwargs))
        # The slot frees when the thread is done, not when a disconnected caller gives up.
        future.add_done_callback(lambda _: loop.call_soon_threadsafe(self._release, held))
        with _timeouts_as_provider_errors(fn):
            return await asyncio.wrap_future(future)

    async def stream(
        self, job: Job, fn: Callable[P, Iterator[T]], *args: P.args, **kwargs: P.kwargs
    ) -> AsyncGenerator[T, None]:
        """The items of the generator `fn(...)`, each made in a worker thread.

        One slot is held from the first item until the caller closes the iterator. The next
        item is made while the caller handles this one, and no further: a caller that reads
        slowly (a client on a slow link) holds the generator back. Closing early (a client
        that left) closes the generator between items and then frees the slot."""
        held = await self._acquire(job)
        loop = asyncio.get_running_loop()
        items = fn(*args, **kwargs)  # a generator: nothing runs before its first item
        next_item = functools.partial(_next_or_done, items)
        pending = self._executor.submit(held.step, next_item)
        try:
            while True:
                with _timeouts_as_provider_errors(fn):
                    item = await asyncio.wrap_future(pending)
                if item is _DONE:
                    return
                pending = self._executor.submit(held.step, next_item)
                yield cast(T, item)
        finally:
            # A generator cannot be closed while a thread runs it: close it after that step.
            def close_then_release(_: object) -> None:
                closing = self._executor.submit(_close, items)
                closing.add_done_callback(lambda _: loop.call_soon_threadsafe(self._release, held))

            pending.add_done_callback(close_then_release)

    async def _acquire(self, job: Job) -> _Held:
        queue = self._queues[job.capability]
        if self._slots.locked() and queue.waiting >= self._max_queued:
            self._metrics.refused(job.capability)
            raise NodeBusy(queue.retry_after(self._size))
        queue.waiting += 1
        self._queue_changed(job.capability)
        waiting_since = time.monotonic()
        try:
            await asyncio.wait_for(self._slots.acquire(), self._queue_timeout)
        except TimeoutError:
            raise ProviderError(
                "Every inference worker stayed busy; the request is safe to retry."
            ) from None
        else:
            queue.running += 1
        finally:  # also when the caller gave up waiting (its client left)
            queue.waiting -= 1
            self._queue_changed(job.capability)
            self._metrics.waited(job.capability, time.monotonic() - waiting_since)
        return _Held(job)

    def _release(self, held: _Held) -> None:
        queue = self._queues[held.job.capability]
        queue.running -= 1
        queue.finished(time.monotonic() - held.since)
        self._queue_changed(held.job.capability)
        self._metrics.inferred(held.job.engine, held.busy_seconds, failed=held.failed)
        self._slots.release()

    def _queue_changed(self, capability: Capability) -> None:
        queue = self._queues[capability]
        self._metrics.queue_changed(capability, queue.waiting, queue.running)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


@dataclass(slots=True)
class _Held:
    """A job holding a slot: since when, and how long its steps have run in a thread."""

    job: Job
    since: float = field(default_factory=time.monotonic)
    busy_seconds: float = 0.0
    failed: bool = False  # an engine error ended it

    def step(self, work: Callable[[], T]) -> T:
        """Run in a worker thread; a job's steps run one after another, never together."""
        started = time.perf_counter()
        try:
            return work()
        except EngineError:
            self.failed = True
            raise
        finally:
            self.busy_seconds += time.perf_counter() - started


_DONE = object()


def _next_or_done(items: Iterator[T]) -> T | object:
    # StopIteration cannot travel through a future (it would end the awaiting coroutine).
    return next(items, _DONE)


def _close(items: Iterator[Any]) -> None:
    close = getattr(items, "close", None)
    if close is not None:
        close()


@contextmanager
def _timeouts_as_provider_errors(fn: Callable[..., Any]) -> Iterator[None]:
    try:
        yield
    except InferenceTimeout as exc:
        logger.warning("%s %s", getattr(fn, "__name__", "inference"), exc)
        raise ProviderError(
            "The voice engine took too long and was stopped; the request is safe to retry."
        ) from None


def _lower_priority() -> None:
    # Linux applies setpriority to a single thread when given its native id.
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), INFERENCE_NICENESS)
