"""A key looked at again while work it was admitted for runs on (a WebSocket session, a
Wyoming stream): whenever tenancy changes (the caches' counter, read five times a second
on every node), and cut off (`CutOff`) once the key may no longer do that work (revoked,
its organization or account suspended, the service or the key's scope taken away), within
the same second a change takes to reach every node's requests."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import TypeVar

from voice_service.core.errors import AccountSuspended, ApiError, InvalidApiKey
from voice_service.core.vocabulary import Scope, Service
from voice_service.tenancy.principal import Principal, principal_of_key
from voice_service.web.context import AppContext
from voice_service.web.deps import check_scope

logger = logging.getLogger(__name__)

T = TypeVar("T")

# How often the watch looks whether tenancy changed (then whether the key may go on).
KEY_WATCH_SECONDS = 0.1


class CutOff:
    """Set once the key may no longer do the work: `error` says why."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.error: ApiError | None = None

    def set(self, error: ApiError) -> None:
        self.error = error
        self.event.set()

    @property
    def code(self) -> str | None:
        """The error code its log row carries, once cut off."""
        return None if self.error is None else self.error.code

    async def race(self, awaitable: Awaitable[T]) -> T:
        """`awaitable`'s result, unless the key is cut off first: then it is cancelled and
        the cut-off's error raised."""
        work = asyncio.ensure_future(awaitable)
        cut = asyncio.ensure_future(self.event.wait())
        try:
            await asyncio.wait({work, cut}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cut.cancel()
            if not work.done():
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await work
        if not work.cancelled():
            return work.result()
        assert self.error is not None
        raise self.error

    async def guard(self, items: AsyncIterator[T]) -> AsyncGenerator[T, None]:
        """`items` until the key is cut off, which raises its error (the iterator closed)."""
        try:
            while True:
                try:
                    item = await self.race(anext(items))
                except StopAsyncIteration:
                    return
                yield item
        finally:
            aclose = getattr(items, "aclose", None)
            if aclose is not None:
                await aclose()


async def _watch_key(
    context: AppContext, key_id: str, scope: Scope, service: Service, cut_off: CutOff
) -> None:
    """Set `cut_off` once the key may no longer use `service` with `scope`."""
    seen = context.tenancy.generation
    while True:
        await asyncio.sleep(KEY_WATCH_SECONDS)
        generation = context.tenancy.generation
        if generation == seen:
            continue
        try:
            current = await principal_of_key(context.sessions, key_id)
        except Exception as exc:  # looked at again on the next round
            logger.warning("could not look at a key again: %r", exc)
            continue
        seen = generation
        refusal = _refusal(current, scope, service)
        if refusal is not None:
            cut_off.set(refusal)
            return


@asynccontextmanager
async def key_watched(
    context: AppContext, key_id: str, scope: Scope, service: Service
) -> AsyncIterator[CutOff]:
    """A `CutOff` the key's watch sets, for as long as the block runs."""
    cut_off = CutOff()
    watching = asyncio.create_task(
        _watch_key(context, key_id, scope, service, cut_off), name="key-watch"
    )
    try:
        yield cut_off
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching


def _refusal(principal: Principal | None, scope: Scope, service: Service) -> ApiError | None:
    """Why `principal` may not do the work now, as its request would be refused."""
    if principal is None:
        return InvalidApiKey("The API key was revoked.")
    if principal.suspended:
        return AccountSuspended("The account or organization was suspended.")
    try:
        check_scope(principal, scope, service)
    except ApiError as error:
        return error
    return None
