"""The bounded worker pool all inference runs in, so the event loop never blocks on a model."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import AsyncGenerator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar, cast

from voice_service.engines.deadline import InferenceTimeout
from voice_service.errors import ProviderError

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


# Inference threads run at a lower CPU priority than the event loop: with every core busy
# in a model, the loop still gets the CPU at once to answer light requests (GET /voices),
# while inference alone on the machine loses nothing.
INFERENCE_NICENESS = 10


class InferencePool:
    """N threads (onnxruntime and CTranslate2 release the GIL) behind a queue with a deadline.

    Load models through `run` too: the threads an engine starts for itself inherit the
    lower priority of the thread that created them."""

    def __init__(self, size: int, queue_timeout: float) -> None:
        self._executor = ThreadPoolExecutor(
            max_workers=size, thread_name_prefix="inference", initializer=_lower_priority
        )
        self._slots = asyncio.Semaphore(size)
        self._queue_timeout = queue_timeout
        self.in_use = 0  # jobs holding a slot: running, or just finished in their thread

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        await self._acquire()
        loop = asyncio.get_running_loop()
        job = self._executor.submit(fn, *args, **kwargs)
        # The slot frees when the thread is done, not when a disconnected caller gives up.
        job.add_done_callback(lambda _: loop.call_soon_threadsafe(self._release))
        with _timeouts_as_provider_errors(fn):
            return await asyncio.wrap_future(job)

    async def stream(
        self, fn: Callable[P, Iterator[T]], *args: P.args, **kwargs: P.kwargs
    ) -> AsyncGenerator[T, None]:
        """The items of the generator `fn(...)`, each made in a worker thread.

        One slot is held from the first item until the caller closes the iterator. The next
        item is made while the caller handles this one, and no further: a caller that reads
        slowly (a client on a slow link) holds the generator back. Closing early (a client
        that left) closes the generator between items and then frees the slot."""
        await self._acquire()
        loop = asyncio.get_running_loop()
        items = fn(*args, **kwargs)  # a generator: nothing runs before its first item
        pending = self._executor.submit(_next_or_done, items)
        try:
            while True:
                with _timeouts_as_provider_errors(fn):
                    item = await asyncio.wrap_future(pending)
                if item is _DONE:
                    return
                pending = self._executor.submit(_next_or_done, items)
                yield cast(T, item)
        finally:
            # A generator cannot be closed while a thread runs it: close it after that step.
            def close_then_release(_: object) -> None:
                closing = self._executor.submit(_close, items)
                closing.add_done_callback(lambda _: loop.call_soon_threadsafe(self._release))

            pending.add_done_callback(close_then_release)

    async def _acquire(self) -> None:
        try:
            await asyncio.wait_for(self._slots.acquire(), self._queue_timeout)
        except TimeoutError:
            raise ProviderError(
                "Every inference worker stayed busy; the request is safe to retry."
            ) from None
        self.in_use += 1

    def _release(self) -> None:
        self.in_use -= 1
        self._slots.release()

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


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
