"""The bounded worker pool all inference runs in, so the event loop never blocks on a model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from voice_service.errors import ProviderError

P = ParamSpec("P")
T = TypeVar("T")


class InferencePool:
    """N threads (onnxruntime and CTranslate2 release the GIL) behind a queue with a deadline."""

    def __init__(self, size: int, queue_timeout: float) -> None:
        self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="inference")
        self._slots = asyncio.Semaphore(size)
        self._queue_timeout = queue_timeout

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            await asyncio.wait_for(self._slots.acquire(), self._queue_timeout)
        except TimeoutError:
            raise ProviderError(
                "Every inference worker stayed busy; the request is safe to retry."
            ) from None
        loop = asyncio.get_running_loop()
        job = self._executor.submit(fn, *args, **kwargs)
        # The slot frees when the thread is done, not when a disconnected caller gives up.
        job.add_done_callback(lambda _: loop.call_soon_threadsafe(self._slots.release))
        return await asyncio.wrap_future(job)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
