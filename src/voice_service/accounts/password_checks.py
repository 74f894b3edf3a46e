"""Password checks off the event loop.

argon2id costs about 0.14 s of CPU a check, the point of it. Run on the event loop, four
clients signing in with made-up emails took an API node from 509 to 7 requests a second.
Checks run in a small pool of their own threads (never the inference pool's, so sign-ins
and speech do not queue behind each other), at the inference threads' lower priority, and
behind a bounded queue: a flood of sign-ins waits its turn or is refused at once, and every
other request keeps the loop and the CPU's first call.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from voice_service.inference.pool import lower_priority
from voice_service.tenancy.users import password_matches

THREADS = 2
# About a second's wait at most for the last in line (bench/engine_settings.md).
MAX_WAITING = 16


class ChecksBusy(Exception):
    """Every password-check thread is busy and the queue is full: try again shortly."""


class PasswordChecks:
    def __init__(self, threads: int = THREADS, max_waiting: int = MAX_WAITING) -> None:
        self._executor = ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="password-check", initializer=lower_priority
        )
        self._capacity = threads + max_waiting
        self._pending = 0  # submitted and not yet finished in a thread

    @property
    def full(self) -> bool:
        return self._pending >= self._capacity

    async def matches(self, password_hash: str | None, password: str) -> bool:
        """`password_matches` in a check thread; raises `ChecksBusy` when the queue is full."""
        if self.full:
            raise ChecksBusy()
        self._pending += 1
        loop = asyncio.get_running_loop()
        future = self._executor.submit(password_matches, password_hash, password)
        # Counted until the thread is done, even if the request gives up waiting for it.
        future.add_done_callback(lambda _: loop.call_soon_threadsafe(self._finished))
        return await asyncio.wrap_future(future)

    def _finished(self) -> None:
        self._pending -= 1

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
