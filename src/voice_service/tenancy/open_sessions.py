"""At most `VOICE_SERVICE_MAX_REALTIME_SESSIONS_PER_KEY` realtime sessions per key, on all
nodes together.

A session is a row. Opening one counts the key's live rows and adds its own in one
transaction that first takes the key row's lock (a no-op UPDATE: the row lock on
PostgreSQL, the write lock on SQLite), so two sessions racing for the last place on any
nodes cannot both get it. The node renews each of its rows' lease while the session runs
and deletes the row when it closes; a row whose node died stops counting when its lease
runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from voice_service.core.errors import RateLimited
from voice_service.core.models import ApiKey, RealtimeSession
from voice_service.kit.db import transaction
from voice_service.tenancy.principal import Principal

logger = logging.getLogger(__name__)

LEASE = timedelta(seconds=90)
RENEW_EVERY = 30.0  # seconds: three renewals may fail before a live session stops counting


@contextlib.asynccontextmanager
async def open_session(
    sessions: async_sessionmaker[AsyncSession],
    principal: Principal,
    request_id: str,
    limit: int,
    clock: Callable[[], datetime],
) -> AsyncIterator[None]:
    """Hold one of the key's `limit` places while the body runs, or raise `RateLimited`."""
    async with transaction(sessions) as session:
        await session.execute(
            update(ApiKey).where(ApiKey.id == principal.key_id).values(name=ApiKey.name)
        )
        now = clock()
        open_now = await session.scalar(
            select(func.count())
            .select_from(RealtimeSession)
            .where(RealtimeSession.key_id == principal.key_id)
            .where(RealtimeSession.lease_until > now)
        )
        if (open_now or 0) >= limit:
            raise RateLimited(
                f"This key has {limit} realtime sessions open, its limit "
                "(VOICE_SERVICE_MAX_REALTIME_SESSIONS_PER_KEY): close one first.",
                headers={"Retry-After": "1"},
            )
        session.add(
            RealtimeSession(request_id=request_id, key_id=principal.key_id, lease_until=now + LEASE)
        )
    renewal = asyncio.create_task(_renew(sessions, request_id, clock))
    try:
        yield
    finally:
        renewal.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await renewal
        try:
            async with transaction(sessions) as session:
                await session.execute(
                    delete(RealtimeSession).where(RealtimeSession.request_id == request_id)
                )
        except Exception as exc:  # its lease runs out instead
            logger.error("could not close realtime session %s: %r", request_id, exc)


async def _renew(
    sessions: async_sessionmaker[AsyncSession], request_id: str, clock: Callable[[], datetime]
) -> None:
    while True:
        await asyncio.sleep(RENEW_EVERY)
        try:
            async with transaction(sessions) as session:
                await session.execute(
                    update(RealtimeSession)
                    .where(RealtimeSession.request_id == request_id)
                    .values(lease_until=clock() + LEASE)
                )
        except Exception as exc:
            logger.error("could not renew realtime session %s: %r", request_id, exc)
