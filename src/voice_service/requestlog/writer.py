"""Group commit for the request log.

Every request writes one row, and its response must not start before that row is durable.
Committing each row on its own costs a transaction (and on SQLite a contended write lock
with sleeping retries) per request; here the rows of concurrent requests share one
transaction, and each request still waits until its own row is committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from voice_service.db import transaction
from voice_service.models import utcnow
from voice_service.requestlog.repository import (
    LAST_USED_RESOLUTION,
    LogEntry,
    insert_entries,
)

logger = logging.getLogger(__name__)

MAX_BATCH = 256
LAST_USED_RESOLUTION_SECONDS = LAST_USED_RESOLUTION.total_seconds()

_Pending = tuple[LogEntry, "asyncio.Future[None]"]


class RequestLogWriter:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions
        self._queue: asyncio.Queue[_Pending] | None = None
        self._task: asyncio.Task[None] | None = None
        self._refreshed: dict[str, float] = {}  # key id -> monotonic time of last refresh

    def start(self) -> None:
        self._queue = asyncio.Queue()
        self._task = asyncio.create_task(self._run(self._queue), name="request-log-writer")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._queue is not None and not self._queue.empty():
            await self._commit(self._drain(self._queue, []))
        self._queue = self._task = None

    async def write(self, entry: LogEntry) -> None:
        """Return once `entry` is committed; raise if committing it failed."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._queue is None:  # not started (no lifespan): commit on the caller's task
            await self._commit([(entry, done)])
        else:
            self._queue.put_nowait((entry, done))
        await done

    async def _run(self, queue: asyncio.Queue[_Pending]) -> None:
        while True:
            batch = self._drain(queue, [await queue.get()])
            await self._commit(batch)

    @staticmethod
    def _drain(queue: asyncio.Queue[_Pending], batch: list[_Pending]) -> list[_Pending]:
        while len(batch) < MAX_BATCH and not queue.empty():
            batch.append(queue.get_nowait())
        return batch

    def _keys_to_refresh(self, entries: list[LogEntry]) -> set[str]:
        # Refreshing last_used_at is a second statement; once a minute per key and process
        # is enough for a hint, and the SQL condition keeps processes from repeating it.
        now = time.monotonic()
        due = set()
        for key_id in {entry.key_id for entry in entries if entry.key_id is not None}:
            if now - self._refreshed.get(key_id, -math.inf) >= LAST_USED_RESOLUTION_SECONDS:
                self._refreshed[key_id] = now
                due.add(key_id)
        return due

    async def _commit(self, batch: list[_Pending]) -> None:
        entries = [entry for entry, _ in batch]
        try:
            async with transaction(self._sessions) as session:
                await insert_entries(session, entries, utcnow(), self._keys_to_refresh(entries))
        except Exception as error:
            logger.exception("could not write %d request log rows", len(batch))
            for _, done in batch:
                if not done.done():
                    done.set_exception(error)
            return
        for _, done in batch:
            if not done.done():
                done.set_result(None)
