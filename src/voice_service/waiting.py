"""Waiting for work without cancelling it.

Cancelling a database call in flight can itself take seconds (asyncpg unwinding a connect
to a silent server), so where a caller needs an answer by a deadline it stops waiting
instead, and the work ends on its own timeouts."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


async def wait_at_most(seconds: float | None, work: Coroutine[Any, Any, T]) -> T:
    """The work's result or exception; TimeoutError if it is still running after `seconds`
    (None: no limit), in which case it runs on and its outcome is dropped."""
    task = asyncio.ensure_future(work)
    task.add_done_callback(_retrieve)
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if not done:
        raise TimeoutError
    return task.result()


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # an outcome nobody waits for is not an unhandled error
