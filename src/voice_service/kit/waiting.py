"""Waiting for work with a way out: a deadline, or a client that left.

Cancelling a database call in flight can itself take seconds (asyncpg unwinding a connect
to a silent server), so where a caller needs an answer by a deadline it stops waiting
instead, and the work ends on its own timeouts. A provider's call, by contrast, is
cancelled when its client leaves: its connection is closed, and the replica stops."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from voice_service.core.errors import ClientClosedRequest

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


async def unless_set(event: asyncio.Event, work: Coroutine[Any, Any, T]) -> T:
    """The work's result, or `ClientClosedRequest` once `event` (a request's `client_gone`)
    is set first, the work then cancelled: a provider's call stops when its client leaves."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        raise
    finally:
        watcher.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        raise ClientClosedRequest()
    return task.result()
