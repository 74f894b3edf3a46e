"""The bounded worker pool all inference runs in, so the event loop never blocks on a model."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

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
        try:
            await asyncio.wait_for(self._slots.acquire(), self._queue_timeout)
        except TimeoutError:
            raise ProviderError(
                "Every inference worker stayed busy; the request is safe to retry."
            ) from None
        self.in_use += 1
        loop = asyncio.get_running_loop()
        job = self._executor.submit(fn, *args, **kwargs)
        # The slot frees when the thread is done, not when a disconnected caller gives up.
        job.add_done_callback(lambda _: loop.call_soon_threadsafe(self._release))
        try:
            return await asyncio.wrap_future(job)
        except InferenceTimeout as exc:
            logger.warning("%s %s", getattr(fn, "__name__", "inference"), exc)
            raise ProviderError(
                "The voice engine took too long and was stopped; the request is safe to retry."
            ) from None

    def _release(self) -> None:
        self.in_use -= 1
        self._slots.release()

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


def _lower_priority() -> None:
    # Linux applies setpriority to a single thread when given its native id.
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), INFERENCE_NICENESS)
