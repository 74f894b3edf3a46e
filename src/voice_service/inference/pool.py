"""The bounded worker pool all inference runs in, so the event loop never blocks on a model."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import time
from collections import Counter, deque
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, TypeVar, cast

from threadpoolctl import threadpool_limits

from voice_service.core.errors import ClientClosedRequest, NodeBusy, ProviderError
from voice_service.core.vocabulary import Capability
from voice_service.engines.deadline import InferenceTimeout
from voice_service.engines.protocols import EngineError
from voice_service.inference.admission import CapabilityQueue, Job, Priority
from voice_service.kit.metrics.registry import Metrics

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")
# A step's outcome, on the event loop.
Step = asyncio.Future


# Inference threads run at a lower CPU priority than the event loop: with every core busy
# in a model, the loop still gets the CPU at once to answer light requests (GET /voices),
# while inference alone on the machine loses nothing.
INFERENCE_NICENESS = 10
# Parts of one job made ahead of what its caller took, per worker: with one, a worker that
# finished a short part would idle until the part before it is done too. Two hold a few
# seconds of audio more per request; what grows with a part, its inference memory, is held
# only while a worker makes it.
LOOKAHEAD_PER_WORKER = 2


def one_blas_thread() -> None:
    """NumPy's and SciPy's BLAS run on the calling thread alone, as every step here does:
    with a thread per core, each small product of a step (a mel filterbank, a similarity
    matrix) wakes the others, which then spin between products on the cores that concurrent
    steps need, and the step is no faster (bench/engine_settings.md). Process-wide, for the
    libraries loaded by now: the pool starts after every engine module is imported."""
    threadpool_limits(limits=1, user_api="blas")


class InferencePool:
    """N threads (onnxruntime and CTranslate2 release the GIL) behind a queue with a deadline,
    and a bound on each capability's share of that queue.

    Work is scheduled by step (a chunk of text, a window of audio), not by request: each
    step takes a slot and gives it back, and a free slot goes to the most urgent step
    waiting (`Priority`): live turns, then first steps, then the rest. So starting costs
    every request one step's wait, however many long answers are under way, and the
    total work done stays the same.

    A request that finds every slot busy and `max_queued` requests of its capability
    already waiting is refused at once (`NodeBusy`, with a Retry-After from the measured
    slot times) rather than left to wait out the deadline; one that queues still waits at
    most `queue_timeout`. A job whose `abandoned` event is set (its client left) stops
    waiting and raises `ClientClosedRequest`; one not yet started never starts."""

    def __init__(self, size: int, queue_timeout: float, max_queued: int, metrics: Metrics) -> None:
        one_blas_thread()
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
    def size(self) -> int:
        return self._size

    @property
    def has_free_slot(self) -> bool:
        """Optional work asking now would run at once, and leave a slot for what is not
        optional (see `_Slots.spare`)."""
        return self._slots.spare

    def waited_steps(self) -> dict[str, int]:
        """Steps that found no slot they could take and waited, by priority: what shows
        that live turns and requests never wait while only jobs' pieces run."""
        return {priority.name.lower(): self._slots.waited[priority] for priority in Priority}

    def queues(self) -> dict[str, dict[str, int]]:
        """Per capability: steps waiting for a slot, and holding one."""
        return {
            capability: {"waiting": queue.waiting, "running": queue.running}
            for capability, queue in self._queues.items()
        }

    async def start_up(self, load: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`load(...)` (the models, at start) in a worker thread: the threads an engine
        starts for itself inherit its lower priority. No request waits yet: no slot taken."""
        return await asyncio.wrap_future(self._executor.submit(load, *args, **kwargs))

    async def run(self, job: Job, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(...)` in a worker thread, as one step."""
        held = _Held(job)
        await self._take_slot(job, job.priority(0))
        # The slot frees when the thread is done, not when a disconnected caller gives up.
        outcome = self._submit(held, functools.partial(fn, *args, **kwargs))
        outcome.add_done_callback(lambda _: self._finished(held))
        with _timeouts_as_provider_errors(_name(fn)):
            return await outcome

    async def stream(
        self, job: Job, fn: Callable[P, Iterator[T]], *args: P.args, **kwargs: P.kwargs
    ) -> AsyncGenerator[T, None]:
        """The items of the generator `fn(...)`, each made in a worker thread, one step at a
        time: the next item is made while the caller handles this one, and no further, so
        a caller that stops asking (a client that stops reading) holds the generator back
        and no worker. Closing early (a client that left) closes the generator between
        items."""
        items = fn(*args, **kwargs)  # a generator: nothing runs before its first item
        order: _InOrder[T, T] = _InOrder(_same, None, steps=None)
        work = functools.partial(_next_or_done, items)
        async with self._steps(job, work, order, width=1, name=_name(fn), items=items) as steps:
            while (item := await steps.next_item()) is not _DONE:
                yield cast(T, item)

    async def in_order(
        self,
        job: Job,
        parts: Sequence[Callable[[], R]],
        emit: Callable[[R], T],
        finish: Callable[[], T],
    ) -> AsyncGenerator[T, None]:
        """`emit` of each part's outcome in order, then `finish()`. The parts are made in
        worker threads, on as many free workers as there are (one request on an idle node
        uses them all) and at most `LOOKAHEAD_PER_WORKER` per worker ahead of what the
        caller took; `emit` runs in the thread that completes the next part, one part at a
        time. The parts must be safe to make at once (an ONNX session's run is)."""
        order: _InOrder[R, T] = _InOrder(emit, finish, steps=max(len(parts), 1))

        def work(index: int) -> R | object:
            return parts[index]() if index < len(parts) else _NO_PART

        width = LOOKAHEAD_PER_WORKER * self._size
        async with self._steps(job, work, order, width=width, name=job.engine) as steps:
            while (item := await steps.next_item()) is not _DONE:
                yield cast(T, item)

    @contextlib.asynccontextmanager
    async def _steps(
        self,
        job: Job,
        work: Callable[[int], object],
        order: _InOrder[Any, Any],
        *,
        width: int,
        name: str,
        items: Iterator[Any] | None = None,
    ) -> AsyncGenerator[_Steps, None]:
        held = _Held(job)
        await self._take_slot(job, job.priority(0))
        steps = _Steps(self, held, work, order, width)
        try:
            with _timeouts_as_provider_errors(name):
                yield steps
        finally:
            steps.stop(lambda: self._close(held, items))

    def _close(self, held: _Held, items: Iterator[Any] | None) -> None:
        """Once no step runs: close the generator, if any, without a slot (closing only
        runs its `finally` blocks), and count the job's work."""
        if items is None:
            self._finished(held)
            return
        loop = asyncio.get_running_loop()
        try:
            closing = self._executor.submit(_close, items)
        except RuntimeError:  # the pool has shut down: no thread will run it again
            _close(items)
            self._finished(held)
        else:
            closing.add_done_callback(lambda _: loop.call_soon_threadsafe(self._finished, held))

    async def _take_slot(self, job: Job, priority: Priority) -> None:
        """Wait for a slot: refused at once when the capability's queue is full (not for a
        job already under way), given up after the queue timeout or once the job is
        abandoned."""
        queue = self._queues[job.capability]
        if job.abandoned is not None and job.abandoned.is_set():
            raise ClientClosedRequest()
        starting = priority in (Priority.LIVE, Priority.FIRST)
        if starting and self._slots.exhausted and queue.waiting >= self._max_queued:
            self._metrics.refused(job.capability)
            raise NodeBusy(queue.retry_after(self._size))
        queue.waiting += 1
        self._queue_changed(job.capability)
        waiting_since = time.monotonic()
        # A batch step waits as long as it takes: the job workers bound how many pieces of
        # jobs wait, and an upload being measured stops waiting once its client leaves.
        timeout = None if priority is Priority.BATCH else self._queue_timeout
        try:
            async with asyncio.timeout(timeout):
                await self._slots.acquire(priority, unless=job.abandoned)
        except TimeoutError:
            raise ProviderError(
                "Every inference worker stayed busy; the request is safe to retry."
            ) from None
        else:
            queue.running += 1
        finally:  # also when the caller gave up waiting (its client left)
            queue.waiting -= 1
            self._queue_changed(job.capability)
            if starting:
                self._metrics.waited(job.capability, time.monotonic() - waiting_since)

    def _take_free_slot(self, job: Job, priority: Priority) -> bool:
        """Take a slot only if one is free and nobody waits for it."""
        if not self._slots.take_free(priority):
            return False
        self._queues[job.capability].running += 1
        self._queue_changed(job.capability)
        return True

    def _submit(self, held: _Held, work: Callable[[], T]) -> Step[T]:
        """Run one step of `held` in a thread on a slot it holds. When the thread is done,
        on the event loop: the slot is given back, then the returned future gets the
        step's outcome."""
        loop = asyncio.get_running_loop()
        since = time.monotonic()
        job = held.job
        try:
            step = self._executor.submit(held.step, work)
        except RuntimeError:  # the pool has shut down
            self._release(job, since)
            raise ProviderError(
                "The node is shutting down; the request is safe to retry."
            ) from None
        outcome: Step[T] = loop.create_future()

        def done() -> None:
            self._release(job, since)
            if not outcome.cancelled():  # its awaiter gave up; the thread ran on regardless
                _copy_outcome(step, outcome)

        step.add_done_callback(lambda _: loop.call_soon_threadsafe(done))
        return outcome

    def _release(self, job: Job, since: float) -> None:
        queue = self._queues[job.capability]
        queue.running -= 1
        queue.finished(time.monotonic() - since)
        self._queue_changed(job.capability)
        self._slots.release(batch=job.batch)

    def _finished(self, held: _Held) -> None:
        self._metrics.inferred(held.job.engine, held.busy_seconds, failed=held.failed)

    def _queue_changed(self, capability: Capability) -> None:
        queue = self._queues[capability]
        self._metrics.queue_changed(capability, queue.waiting, queue.running)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


class _Steps:
    """The steps of one job, on the event loop: which to start, on what slot, and when.

    Step `i` may start once the caller has taken item `i - width` (a caller that stops
    asking holds the job back). The job's first step has its slot already. Further steps
    take free slots while there are some; when none of the job's steps runs, the next
    waits in line for one (`Priority.LATER`), behind every job's first step. A step gives
    its slot back when it ends, so the job keeps no worker it is not using."""

    def __init__(
        self,
        pool: InferencePool,
        held: _Held,
        work: Callable[[int], object],
        order: _InOrder[Any, Any],
        width: int,
    ) -> None:
        self._pool = pool
        self._held = held
        self._work = work
        self._order = order
        self._width = width
        self._next = 0  # the next step to start
        self._running = 0
        self._taken = 0  # items the caller took
        self._waiting: asyncio.Task[None] | None = None  # the next step, waiting for a slot
        self._wake: asyncio.Future[None] | None = None  # the caller, waiting for an item
        self._on_idle: Callable[[], None] | None = None  # set once stopped
        self._start()  # on the slot taken for it
        self._plan()

    async def next_item(self) -> object:
        """The next item in order, `_DONE` after the last; a step's error, in its turn."""
        while True:
            item = self._order.take()
            if item is not _NOTHING:
                if item is not _DONE:
                    self._taken += 1
                    self._plan()
                return item
            if self._waiting is not None and self._waiting.done():
                self._waiting.result()  # why it got no slot (or gave up: the client left)
            abandoned = self._held.job.abandoned
            if abandoned is not None and abandoned.is_set():
                raise ClientClosedRequest()
            self._wake = asyncio.get_running_loop().create_future()
            try:
                await self._wake
            finally:
                self._wake = None

    def stop(self, on_idle: Callable[[], None]) -> None:
        """No more steps; `on_idle()` once none runs. Callbacks, not awaits: this runs
        while the caller is being closed or cancelled."""
        self._on_idle = on_idle
        if self._waiting is not None and not self._waiting.done():
            self._waiting.cancel()  # a slot handed over just now is passed on
            self._waiting.add_done_callback(lambda _: self._idle_check())
        else:
            self._idle_check()

    def _plan(self) -> None:
        job = self._held.job
        if (
            self._on_idle is not None
            or self._order.ended
            or (job.abandoned is not None and job.abandoned.is_set())
        ):
            return
        limit = self._taken + self._width
        if self._order.steps is not None:
            limit = min(limit, self._order.steps)
        while (
            self._next < limit
            and self._waiting is None
            and self._pool._take_free_slot(job, job.priority(self._next))
        ):
            self._start()
        if self._next < limit and self._running == 0 and self._waiting is None:
            self._waiting = asyncio.ensure_future(self._start_in_turn())
            self._waiting.add_done_callback(self._waited)

    async def _start_in_turn(self) -> None:
        await self._pool._take_slot(self._held.job, self._held.job.priority(self._next))
        self._start()

    def _waited(self, waiting: asyncio.Task[None]) -> None:
        if waiting.cancelled() or waiting.exception() is not None:
            self._wake_caller()  # it learns why from the task
            return
        self._waiting = None
        self._plan()

    def _start(self) -> None:
        """Run the next step on a slot taken for it."""
        index = self._next
        self._next += 1
        self._running += 1
        order = self._order
        work = self._work

        def step() -> None:
            try:
                made = work(index)
            except BaseException as exc:
                order.put(index, _Failure(exc))
                raise
            order.put(index, made)

        try:
            outcome = self._pool._submit(self._held, step)
        except ProviderError as exc:  # the pool has shut down
            self._running -= 1
            order.put(index, _Failure(exc))
            self._wake_caller()
            return
        outcome.add_done_callback(self._step_done)

    def _step_done(self, outcome: Step[None]) -> None:
        if not outcome.cancelled():
            outcome.exception()  # seen: the caller gets it in its turn, from the order
        self._running -= 1
        self._plan()
        self._wake_caller()
        self._idle_check()

    def _wake_caller(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def _idle_check(self) -> None:
        waiting = self._waiting is not None and not self._waiting.done()
        if self._on_idle is not None and self._running == 0 and not waiting:
            on_idle, self._on_idle = self._on_idle, _ignore
            on_idle()


class _InOrder(Generic[R, T]):
    """Made parts handed on in order, whichever worker thread made them: the thread that
    completes the next part runs `emit` on it, and on any parts made after it, one thread
    at a time; after the last of `steps` (or a part made as `_DONE`), `finish()`."""

    def __init__(
        self, emit: Callable[[R], T], finish: Callable[[], T] | None, *, steps: int | None
    ) -> None:
        self.steps = steps
        self._emit = emit
        self._finish = finish
        self._lock = threading.Lock()
        self._made: dict[int, object] = {}
        self._next = 0  # the next part to emit
        self._emitting = False
        self._items: deque[object] = deque()  # emitted, not yet taken; then _DONE or a failure
        self.ended = False  # no part after the ones made is wanted

    def put(self, index: int, made: object) -> None:
        """In a worker thread: part `index` is made (or failed, as a `_Failure`). Raises
        what `emit` raised, if it failed in this thread."""
        with self._lock:
            self._made[index] = made
            if self._emitting:
                return  # the thread emitting now will emit it in its turn
            self._emitting = True
        while True:
            with self._lock:
                part = self._made.pop(self._next, _NOTHING)
                if part is _NOTHING or self.ended:  # the next part is not made yet
                    self._emitting = False
                    return
                index = self._next
                self._next += 1
            items = self._emitted(index, part)
            with self._lock:
                self._items.extend(items)
                ending = items[-1] if items else None
                if ending is _DONE or isinstance(ending, _Failure):
                    self.ended = True
            if isinstance(ending, _Failure) and ending is not part:
                raise ending.error  # `emit` failed in this thread: its step failed

    def _emitted(self, index: int, part: object) -> list[object]:
        if isinstance(part, _Failure):
            return [part]
        try:
            items: list[object] = (
                [] if part is _NO_PART or part is _DONE else [self._emit(cast(R, part))]
            )
            if part is _DONE or index + 1 == self.steps:
                if self._finish is not None:
                    items.append(self._finish())
                items.append(_DONE)
        except BaseException as exc:
            return [_Failure(exc)]
        return items

    def take(self) -> object:
        """The next item, `_DONE` after the last, `_NOTHING` if none is ready yet; raises
        a part's error in its turn."""
        with self._lock:
            if not self._items:
                return _NOTHING
            item = self._items[0]
            if item is _DONE:
                return _DONE
            if isinstance(item, _Failure):
                raise item.error
            return self._items.popleft()


@dataclass(frozen=True, slots=True)
class _Failure:
    error: BaseException


class _Slots:
    """`size` slots, each handed to the most urgent step waiting, in order of asking within
    a priority. A batch step never takes the last free slot (of more than one): a live turn
    or a request's first step always finds one that no job's piece holds."""

    def __init__(self, size: int) -> None:
        self._free = size
        self._kept = 1 if size > 1 else 0  # free slots batch steps leave alone
        self._batch_held = 0
        self._lines: dict[Priority, deque[asyncio.Future[None]]] = {
            priority: deque() for priority in Priority
        }
        # Steps that found no slot they could take and waited in line, by priority.
        self.waited: Counter[Priority] = Counter()

    @property
    def exhausted(self) -> bool:
        return self._free == 0

    @property
    def spare(self) -> bool:
        """A slot is free for optional work (a live partial transcript): one beyond the
        slot kept from batch steps while they run, so that the turn's final still finds
        one; and nobody waits for it."""
        kept = self._kept if self._batch_held else 0
        return self._free > kept and self.idle_line

    @property
    def idle_line(self) -> bool:
        """Nobody waits for a slot that could be handed one."""
        return not any(line for priority, line in self._lines.items() if self._may_take(priority))

    def _may_take(self, priority: Priority) -> bool:
        if priority is Priority.BATCH:
            return self._free - 1 >= self._kept
        return self._free > 0

    def take_free(self, priority: Priority) -> bool:
        """Take a slot if one is free and nobody waits for it."""
        if self.idle_line and self._may_take(priority):
            self._take(priority)
            return True
        return False

    def _take(self, priority: Priority) -> None:
        self._free -= 1
        self._batch_held += priority is Priority.BATCH

    async def acquire(self, priority: Priority, *, unless: asyncio.Event | None = None) -> None:
        """Take a slot; raise `ClientClosedRequest` instead if `unless` is set first."""
        if self.take_free(priority):
            return
        self.waited[priority] += 1
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        line = self._lines[priority]
        line.append(waiter)
        watcher = _set_when(unless, waiter) if unless is not None else None
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                # Handed a slot just as its waiter gave up: pass it on.
                self.release(batch=priority is Priority.BATCH)
            elif waiter in line:
                line.remove(waiter)
            raise
        finally:
            if watcher is not None:
                watcher.cancel()

    def release(self, *, batch: bool) -> None:
        """Give back a slot (one a batch step held, if `batch`), to the most urgent step
        waiting that may take it."""
        self._free += 1
        self._batch_held -= batch
        for priority, line in self._lines.items():  # most urgent first
            while line and self._may_take(priority):
                waiter = line.popleft()
                if not waiter.done():
                    waiter.set_result(None)
                    self._take(priority)
                    return


def _set_when(event: asyncio.Event, waiter: asyncio.Future[None]) -> asyncio.Task[None]:
    """A task that fails `waiter` with `ClientClosedRequest` once `event` is set."""

    async def watch() -> None:
        await event.wait()
        if not waiter.done():
            waiter.set_exception(ClientClosedRequest())

    return asyncio.ensure_future(watch())


@dataclass(slots=True)
class _Held:
    """A job's steps so far: how long they ran in threads, and whether an engine error
    ended one."""

    job: Job
    busy_seconds: float = 0.0
    failed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def step(self, work: Callable[[], T]) -> T:
        """Run in a worker thread, maybe beside another step of the same job."""
        started = time.perf_counter()
        try:
            return work()
        except EngineError:
            self.failed = True
            raise
        finally:
            with self._lock:
                self.busy_seconds += time.perf_counter() - started


_DONE = object()  # after a job's last item
_NOTHING = object()  # no item (or part) yet
_NO_PART = object()  # the step that only finishes a job with no parts


def _copy_outcome(step: Future[T], outcome: Step[T]) -> None:
    if step.cancelled():  # queued when the pool shut down
        outcome.cancel()
    elif (error := step.exception()) is not None:
        outcome.set_exception(error)
    else:
        outcome.set_result(step.result())


def _next_or_done(items: Iterator[T], _index: int) -> T | object:
    # StopIteration cannot travel through a future (it would end the awaiting coroutine).
    return next(items, _DONE)


def _same(item: T) -> T:
    return item


def _ignore() -> None:
    pass


def _close(items: Iterator[Any]) -> None:
    close = getattr(items, "close", None)
    if close is not None:
        close()


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", "inference")


@contextmanager
def _timeouts_as_provider_errors(name: str) -> Iterator[None]:
    try:
        yield
    except InferenceTimeout as exc:
        logger.warning("%s %s", name, exc)
        raise ProviderError(
            "The voice engine took too long and was stopped; the request is safe to retry."
        ) from None


def lower_priority() -> None:
    """A thread initializer: run this worker thread below the event loop's priority."""
    # Linux applies setpriority to a single thread when given its native id.
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), INFERENCE_NICENESS)
