"""The bounded worker pool all inference runs in, so the event loop never blocks on a model."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar, cast

from voice_service.admission import CapabilityQueue, Job
from voice_service.engines.deadline import InferenceTimeout
from voice_service.engines.protocols import EngineError
from voice_service.errors import ClientClosedRequest, NodeBusy, ProviderError
from voice_service.metrics.registry import Metrics
from voice_service.vocabulary import Capability

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")
# A step's outcome, on the event loop.
Step = asyncio.Future
# Called on the event loop when a step is done, with the step and when its slot was taken:
# whether the slot goes on to the job's next step rather than back to the pool.
AfterStep = Callable[[Future[T], float], bool]


# Inference threads run at a lower CPU priority than the event loop: with every core busy
# in a model, the loop still gets the CPU at once to answer light requests (GET /voices),
# while inference alone on the machine loses nothing.
INFERENCE_NICENESS = 10


class InferencePool:
    """N threads (onnxruntime and CTranslate2 release the GIL) behind a queue with a deadline,
    and a bound on each capability's share of that queue.

    A request that finds every slot busy and `max_queued` requests of its capability
    already waiting is refused at once (`NodeBusy`, with a Retry-After from the measured
    slot times) rather than left to wait out the deadline; one that queues still waits at
    most `queue_timeout`. A job whose `abandoned` event is set (its client left) stops
    waiting and raises `ClientClosedRequest`; one not yet started never starts."""

    def __init__(self, size: int, queue_timeout: float, max_queued: int, metrics: Metrics) -> None:
        self._executor = ThreadPoolExecutor(
            max_workers=size, thread_name_prefix="inference", initializer=lower_priority
        )
        self._size = size
        self._slots = _Slots(size)
        self._queue_timeout = queue_timeout
        self._max_queued = max_queued
        self._metrics = metrics
        self._queues = {capability: CapabilityQueue() for capability in Capability}

    @property
    def in_use(self) -> int:
        """Slots held: by a step running, or just finished, in a thread."""
        return sum(queue.running for queue in self._queues.values())

    @property
    def has_free_slot(self) -> bool:
        """A job asking now would run at once."""
        return not self._slots.exhausted and self._slots.idle_line

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
        held = _Held(job)
        await self._take_slot(job, under_way=False)

        def finished(_step: Future[T], _since: float) -> bool:
            self._finished(held)
            return False  # the slot goes back

        # The slot frees when the thread is done, not when a disconnected caller gives up.
        outcome = self._submit(held, functools.partial(fn, *args, **kwargs), finished)
        with _timeouts_as_provider_errors(fn):
            return await outcome

    async def stream(
        self, job: Job, fn: Callable[P, Iterator[T]], *args: P.args, **kwargs: P.kwargs
    ) -> AsyncGenerator[T, None]:
        """The items of the generator `fn(...)`, each made in a worker thread, one step at a
        time (see `_Steps`): the next item is made while the caller handles this one, and
        no further, so a caller that stops asking (a client that stops reading) holds the
        generator back and, once its item ahead is made, no worker. Closing early (a client
        that left) closes the generator between items."""
        held = _Held(job)
        items = fn(*args, **kwargs)  # a generator: nothing runs before its first item
        await self._take_slot(job, under_way=False)
        steps = _Steps(self, held, functools.partial(_next_or_done, items))
        try:
            while True:
                with _timeouts_as_provider_errors(fn):
                    item = await steps.next_item()
                if item is _DONE:
                    return
                yield cast(T, item)
        finally:
            self._close_when_idle(held, items, steps.stop())

    def _close_when_idle(
        self, held: _Held, items: Iterator[Any], ahead: asyncio.Task[Step[object]] | None
    ) -> None:
        """Close the generator once no thread runs it (it cannot be closed while one does),
        without a slot: closing only runs its `finally` blocks. Callbacks, not awaits: this
        runs while the caller is being closed or cancelled."""
        loop = asyncio.get_running_loop()

        def close(_: object = None) -> None:
            try:
                closing = self._executor.submit(_close, items)
            except RuntimeError:  # the pool has shut down: no thread will run it again
                _close(items)
                self._finished(held)
            else:
                closing.add_done_callback(lambda _: loop.call_soon_threadsafe(self._finished, held))

        def after_last_step(_: object = None) -> None:
            last = held.last_step
            if last is None or last.done():
                close()
            else:
                last.add_done_callback(lambda _: loop.call_soon_threadsafe(close))

        if ahead is not None and not ahead.done():
            ahead.cancel()  # still waiting for a slot: it stops (one just handed over is passed on)
            ahead.add_done_callback(after_last_step)
        else:
            after_last_step()

    async def _take_slot(self, job: Job, *, under_way: bool) -> None:
        """Wait for a slot: refused at once when the capability's queue is full (not for a
        job already under way), given up after the queue timeout or once the job is
        abandoned."""
        queue = self._queues[job.capability]
        if job.abandoned is not None and job.abandoned.is_set():
            raise ClientClosedRequest()
        if not under_way and self._slots.exhausted and queue.waiting >= self._max_queued:
            self._metrics.refused(job.capability)
            raise NodeBusy(queue.retry_after(self._size))
        queue.waiting += 1
        self._queue_changed(job.capability)
        waiting_since = time.monotonic()
        try:
            async with asyncio.timeout(self._queue_timeout):
                await self._slots.acquire(under_way=under_way, unless=job.abandoned)
        except TimeoutError:
            raise ProviderError(
                "Every inference worker stayed busy; the request is safe to retry."
            ) from None
        else:
            queue.running += 1
        finally:  # also when the caller gave up waiting (its client left)
            queue.waiting -= 1
            self._queue_changed(job.capability)
            if not under_way:
                self._metrics.waited(job.capability, time.monotonic() - waiting_since)

    def _submit(
        self,
        held: _Held,
        work: Callable[[], T],
        after: AfterStep[T] | None = None,
        since: float | None = None,
    ) -> Step[T]:
        """Run one step of `held` in a thread on the slot it holds (since `since`, or now).
        When the thread is done, on the event loop: the slot is given back, unless
        `after(step, since)` passed it on to the job's next step; then the returned future
        gets the step's outcome (so whoever awaits it sees the slot's fate decided)."""
        loop = asyncio.get_running_loop()
        held_since = time.monotonic() if since is None else since
        step = self._executor.submit(held.step, work)
        held.last_step = step
        outcome: Step[T] = loop.create_future()
        capability = held.job.capability

        def done() -> None:
            if after is None or not after(step, held_since):
                self._release(capability, held_since)
            if not outcome.cancelled():  # its awaiter gave up; the thread ran on regardless
                _copy_outcome(step, outcome)

        step.add_done_callback(lambda _: loop.call_soon_threadsafe(done))
        return outcome

    def _release(self, capability: Capability, since: float) -> None:
        queue = self._queues[capability]
        queue.running -= 1
        queue.finished(time.monotonic() - since)
        self._queue_changed(capability)
        self._slots.release()

    def _finished(self, held: _Held) -> None:
        self._metrics.inferred(held.job.engine, held.busy_seconds, failed=held.failed)

    def _queue_changed(self, capability: Capability) -> None:
        queue = self._queues[capability]
        self._metrics.queue_changed(capability, queue.waiting, queue.running)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


class _Steps:
    """The steps of one generator job, each making one item in a worker thread.

    A step whose item the caller is already waiting for passes its slot straight on to the
    next step: the next item is made while the caller handles this one, and a caller that
    keeps up keeps its worker. A step that finishes before the caller asks (a client not
    reading) gives its slot back; when the caller does ask, the next step takes a slot
    again, ahead of jobs not yet started. A job whose client left is not continued."""

    def __init__(self, pool: InferencePool, held: _Held, work: Callable[[], object]) -> None:
        self._pool = pool
        self._held = held
        self._work = work
        self._waiting = False  # the caller awaits the current step's item
        self._chained: Step[object] | None = None  # the next step, on the current's slot
        self._ahead: asyncio.Task[Step[object]] | None = None  # taking a slot for it
        self._current: Step[object] | None = pool._submit(held, work, self._keep_slot)

    async def next_item(self) -> object:
        self._waiting = True
        try:
            if self._current is None:
                assert self._ahead is not None
                self._current = await self._ahead
                self._ahead = None
            item = await self._current
        finally:
            self._waiting = False
        self._current, self._chained = self._chained, None
        if self._current is None and item is not _DONE:
            self._ahead = asyncio.ensure_future(self._next_step())
        return item

    def stop(self) -> asyncio.Task[Step[object]] | None:
        """No more steps: the task still taking a slot for one, if any, to be ended."""
        self._waiting = False
        return self._ahead

    def _keep_slot(self, step: Future[object], since: float) -> bool:
        abandoned = self._held.job.abandoned
        if (
            not self._waiting
            or self._chained is not None  # one ahead already: the caller has not taken it
            or step.cancelled()
            or step.exception() is not None
            or step.result() is _DONE
            or (abandoned is not None and abandoned.is_set())
        ):
            return False
        try:
            self._chained = self._pool._submit(self._held, self._work, self._keep_slot, since)
        except RuntimeError:  # the pool has shut down
            return False
        return True

    async def _next_step(self) -> Step[object]:
        await self._pool._take_slot(self._held.job, under_way=True)
        return self._pool._submit(self._held, self._work, self._keep_slot)


class _Slots:
    """`size` slots handed out in order of asking, except that the next step of a job
    already under way goes before any job not yet started: admitted work finishes first,
    and a new request waits only behind work that admission control has counted."""

    def __init__(self, size: int) -> None:
        self._free = size
        self._under_way: deque[asyncio.Future[None]] = deque()
        self._new: deque[asyncio.Future[None]] = deque()

    @property
    def exhausted(self) -> bool:
        return self._free == 0

    @property
    def idle_line(self) -> bool:
        """Nobody waits for a slot."""
        return not self._under_way and not self._new

    async def acquire(self, *, under_way: bool, unless: asyncio.Event | None = None) -> None:
        """Take a slot; raise `ClientClosedRequest` instead if `unless` is set first."""
        if self._free > 0 and not self._under_way and not self._new:
            self._free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        line = self._under_way if under_way else self._new
        line.append(waiter)
        watcher = _set_when(unless, waiter) if unless is not None else None
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self.release()  # handed a slot just as its waiter gave up: pass it on
            elif waiter in line:
                line.remove(waiter)
            raise
        finally:
            if watcher is not None:
                watcher.cancel()

    def release(self) -> None:
        for line in (self._under_way, self._new):
            while line:
                waiter = line.popleft()
                if not waiter.done():
                    waiter.set_result(None)
                    return
        self._free += 1


def _set_when(event: asyncio.Event, waiter: asyncio.Future[None]) -> asyncio.Task[None]:
    """A task that fails `waiter` with `ClientClosedRequest` once `event` is set."""

    async def watch() -> None:
        await event.wait()
        if not waiter.done():
            waiter.set_exception(ClientClosedRequest())

    return asyncio.ensure_future(watch())


@dataclass(slots=True)
class _Held:
    """A job's steps so far: how long they ran in a thread, the last one, and whether an
    engine error ended it."""

    job: Job
    busy_seconds: float = 0.0
    failed: bool = False
    last_step: Future[Any] | None = None

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


def _copy_outcome(step: Future[T], outcome: Step[T]) -> None:
    if step.cancelled():  # queued when the pool shut down
        outcome.cancel()
    elif (error := step.exception()) is not None:
        outcome.set_exception(error)
    else:
        outcome.set_result(step.result())


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


def lower_priority() -> None:
    """A thread initializer: run this worker thread below the event loop's priority."""
    # Linux applies setpriority to a single thread when given its native id.
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), INFERENCE_NICENESS)
