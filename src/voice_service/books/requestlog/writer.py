"""Group commit for the request log, with a local spool for database outages.

Every request writes one row, and its response must not start before that row is durable.
Committing each row on its own costs a transaction (and on SQLite a contended write lock
with sleeping retries) per request; here the rows of concurrent requests share one
transaction, and each request still waits until its own row is committed.

When the database cannot take a batch, the batch goes to the process's spool (fsync'd) and
the requests go on. While the spool holds rows, new rows join it behind them, so no request
waits on a database that is known to be failing; a replay task feeds the spool into the
database a chunk at a time, retrying every second, until it is empty.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from voice_service.books.requestlog.repository import (
    LAST_USED_RESOLUTION,
    LogEntry,
    insert_entries,
    insert_entries_blocking,
)
from voice_service.books.requestlog.spool import LogSpool
from voice_service.kit.db import SqliteWriteThread, transaction
from voice_service.kit.logs import REQUEST_FIELDS
from voice_service.kit.metrics.registry import Metrics
from voice_service.kit.waiting import wait_at_most

logger = logging.getLogger(__name__)
# The request line, whoever writes its row (kit/logs.py formats it).
_requests = logging.getLogger("voice_service.requests")

MAX_BATCH = 256
REPLAY_CHUNK = 1000
RETRY_SECONDS = 1.0
LAST_USED_RESOLUTION_SECONDS = LAST_USED_RESOLUTION.total_seconds()

_Pending = tuple[LogEntry, "asyncio.Future[None]"]


class RequestLogWriter:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        timeout: float | None,
        metrics: Metrics,
        sqlite: SqliteWriteThread | None = None,
    ) -> None:
        """`timeout`: how long a batch waits for the database before it is spooled;
        `sqlite`: the thread that writes batches to an SQLite database, if that is it."""
        self._sessions = sessions
        self._sqlite = sqlite
        self._metrics = metrics
        self._timeout = timeout
        self._queue: asyncio.Queue[_Pending] | None = None
        self._task: asyncio.Task[None] | None = None
        self._spool: LogSpool | None = None
        self._spool_lock = asyncio.Lock()  # appends and replay bookkeeping take turns
        self._replayer: asyncio.Task[None] | None = None
        self._refreshed: dict[str, float] = {}  # key id -> monotonic time of last refresh

    @property
    def spooling(self) -> bool:
        """Rows wait in the spool for the database."""
        return self._spool is not None and self._spool.pending

    def start(self, spool: LogSpool | None = None) -> None:
        self._spool = spool
        self._queue = asyncio.Queue()
        self._task = asyncio.create_task(self._run(self._queue), name="request-log-writer")
        self._replay_soon()  # what dead processes left, adopted into this spool

    async def stop(self) -> None:
        for task in (self._task, self._replayer):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._queue is not None and not self._queue.empty():
            await self._commit(self._drain(self._queue, []))
        self._queue = self._task = self._replayer = None
        if self._sqlite is not None:  # its thread is this writer's alone
            await asyncio.to_thread(self._sqlite.close)
            self._sqlite = None

    def announce(self, entry: LogEntry, key_prefix: str | None, client: str | None) -> None:
        """The request's line in the process log and its count in the metrics: once per
        row, whoever writes it (`write`, or a billed success in its own transaction)."""
        _log_request(entry, key_prefix, client)
        self._metrics.count_request(
            entry.method,
            entry.path,
            entry.status,
            entry.duration_ms,
            entry.error_code,
            entry.org_id,
        )

    async def write(self, entry: LogEntry) -> None:
        """Return once `entry` is durable (in the database or the spool); else raise."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._queue is None:  # not started (no lifespan): commit on the caller's task
            await self._commit([(entry, done)])
        else:
            self._queue.put_nowait((entry, done))
        await done

    def keys_to_refresh(self, entries: Sequence[LogEntry]) -> set[str]:
        """Keys whose last_used_at this process should refresh with these rows.

        Refreshing it is a second statement; once a minute per key and process is enough
        for a hint, and the SQL condition keeps processes from repeating it."""
        now = time.monotonic()
        due = set()
        for key_id in {entry.key_id for entry in entries if entry.key_id is not None}:
            if now - self._refreshed.get(key_id, -math.inf) >= LAST_USED_RESOLUTION_SECONDS:
                self._refreshed[key_id] = now
                due.add(key_id)
        return due

    async def _run(self, queue: asyncio.Queue[_Pending]) -> None:
        while True:
            batch = self._drain(queue, [await queue.get()])
            await self._commit(batch)

    @staticmethod
    def _drain(queue: asyncio.Queue[_Pending], batch: list[_Pending]) -> list[_Pending]:
        while len(batch) < MAX_BATCH and not queue.empty():
            batch.append(queue.get_nowait())
        return batch

    async def _commit(self, batch: list[_Pending]) -> None:
        entries = [entry for entry, _ in batch]
        try:
            # While the spool holds rows, new ones go behind them.
            if self.spooling or not await self._inserted_in_time(entries):
                await self._to_spool(entries)
        except Exception as error:
            for _, done in batch:
                if not done.done():
                    done.set_exception(error)
            return
        for _, done in batch:
            if not done.done():
                done.set_result(None)

    async def _inserted_in_time(self, entries: list[LogEntry]) -> bool:
        """Insert the rows, or give up waiting after the timeout. A database that does not
        answer costs a pooled connection's ping and a reconnect, each up to the statement
        timeout; the requests waiting on this batch should not pay both. An attempt given
        up on runs on: should it land, the spooled copies are skipped on replay."""
        try:
            await wait_at_most(self._timeout, self._insert(entries))
        except TimeoutError:
            logger.error("request log: the database did not answer in %g s", self._timeout)
            return False
        except Exception as exc:
            logger.error("could not write %d request log rows: %r", len(entries), exc)
            return False
        return True

    async def _insert(self, entries: Sequence[LogEntry]) -> None:
        used_keys = self.keys_to_refresh(entries)
        if self._sqlite is not None:
            await self._sqlite.run(lambda c: insert_entries_blocking(c, entries, used_keys))
            return
        async with transaction(self._sessions) as session:
            await insert_entries(session, entries, used_keys)

    async def _to_spool(self, entries: list[LogEntry]) -> None:
        if self._spool is None:
            raise RuntimeError("the database did not take the rows and there is no spool")
        try:
            async with self._spool_lock:
                await asyncio.to_thread(self._spool.append, entries)
        except Exception:
            logger.exception("could not spool %d request log rows", len(entries))
            raise
        self._replay_soon()

    def _replay_soon(self) -> None:
        if self.spooling and self._replayer is None:
            self._replayer = asyncio.create_task(self._replay(), name="request-log-replay")

    async def _replay(self) -> None:
        spool = self._spool
        assert spool is not None
        while spool.pending:
            await asyncio.sleep(RETRY_SECONDS)
            try:
                while spool.pending:
                    async with self._spool_lock:
                        entries, end = await asyncio.to_thread(spool.unreplayed, REPLAY_CHUNK)
                    if entries:
                        await self._insert(entries)
                    async with self._spool_lock:
                        await asyncio.to_thread(spool.replayed, end)
            except Exception as exc:
                logger.warning("request log spool: the database is still unavailable (%r)", exc)
        logger.warning("request log spool replayed: rows go to the database again")
        self._replayer = None


def _log_request(entry: LogEntry, key_prefix: str | None, client: str | None) -> None:
    """The request's one line, whoever writes its row."""
    fields = {name: getattr(entry, name, None) for name in REQUEST_FIELDS}
    fields["key_prefix"] = key_prefix  # the row has the key's id; the log its display prefix
    fields["client"] = client  # the log's alone
    _requests.info(
        "%s %s %s %d %s %dms",
        entry.request_id,
        entry.method,
        entry.path,
        entry.status,
        entry.error_code or "-",
        entry.duration_ms,
        extra=fields,
    )
