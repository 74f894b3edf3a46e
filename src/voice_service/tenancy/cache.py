"""Per-process caches of tenancy (resolved API keys, organizations' clone listings), kept
honest by one version counter in the database.

Every change that could make a cached entry wrong bumps `tenancy_version` in the change's
own transaction (`record_change`): revoking a key, suspending or reinstating, disabling or
enabling a service, creating or deleting a clone, from a node or from the CLI. Each process
reads the counter every POLL_SECONDS and drops its entries when it has moved, and serves
nothing from its caches while its last good read is older than MAX_STALENESS_SECONDS (a
database that does not answer). So a committed change is in effect on every node within
MAX_STALENESS_SECONDS, and at once in the process that made it: its commit drops that
process's caches. A counter read from the database cannot be missed the way a message can.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from sqlalchemy import event, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlalchemy.orm import Session

from voice_service.core.models import TenancyVersion

logger = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

POLL_SECONDS = 0.2
# The bound promised for a change to reach every node is 1 s; this leaves a request that
# read its entry just before the bound a fifth of a second to be answered.
MAX_STALENESS_SECONDS = 0.8
VERSION_ROW = 1

# Session.info key: the session's transaction changed tenancy.
_CHANGED = "tenancy_changed"
# This process's watchers (one per app): a change it commits reaches them all at once.
_WATCHERS: weakref.WeakSet[TenancyWatcher] = weakref.WeakSet()


async def record_change(session: AsyncSession) -> None:
    """Make every node's cached tenancy stale when this session's transaction commits."""
    await session.execute(
        update(TenancyVersion)
        .where(TenancyVersion.id == VERSION_ROW)
        .values(version=TenancyVersion.version + 1)
    )
    session.info[_CHANGED] = True


@event.listens_for(Session, "after_commit")
def _drop_own_caches(session: Session) -> None:
    # The committing process need not wait for its next read of the counter.
    if session.info.pop(_CHANGED, False):
        for watcher in list(_WATCHERS):
            watcher.invalidate()


@event.listens_for(Session, "after_rollback")
def _forget_rolled_back_change(session: Session) -> None:
    session.info.pop(_CHANGED, None)


class TenancyWatcher:
    """Follows the tenancy version: `generation` moves whenever cached entries must go."""

    def __init__(self, db: AsyncEngine, clock: Callable[[], float] = time.monotonic) -> None:
        self._db = db
        self._clock = clock
        self.generation = 0
        self._version: int | None = None
        self._read_at = -math.inf  # when the last good read started (monotonic)
        self._task: asyncio.Task[None] | None = None
        self._failing = False
        _WATCHERS.add(self)

    @property
    def fresh(self) -> bool:
        """Whether cached entries may be served: the counter was read recently enough."""
        return self._clock() - self._read_at <= MAX_STALENESS_SECONDS

    def invalidate(self) -> None:
        self.generation += 1

    async def read_version(self) -> None:
        # A read that started after a change's commit sees it, whenever it returns.
        started = self._clock()
        async with self._db.connect() as connection:
            version = await connection.scalar(
                select(TenancyVersion.version).where(TenancyVersion.id == VERSION_ROW)
            )
        if version != self._version:
            self._version = version
            self.invalidate()
        self._read_at = started

    def start(self) -> None:
        self._task = asyncio.create_task(self._follow(), name="tenancy-watcher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _follow(self) -> None:
        while True:
            # No deadline of its own: the database's timeouts bound a read, and while one
            # hangs the caches go stale and serve nothing. One read at a time.
            try:
                await self.read_version()
            except Exception as exc:
                if not self._failing:  # one line per outage, not five a second
                    logger.warning("tenancy caches off: cannot read the version (%r)", exc)
                self._failing = True
            else:
                if self._failing:
                    logger.warning("tenancy caches on again")
                self._failing = False
            await asyncio.sleep(POLL_SECONDS)


class FreshCache(Generic[K, V]):
    """At most `max_entries` values, least recently used dropped first, each served only
    while the watcher is fresh and its generation is the one the value was loaded under."""

    def __init__(self, watcher: TenancyWatcher, max_entries: int) -> None:
        self._watcher = watcher
        self._max_entries = max_entries
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._generation = watcher.generation

    async def get(self, key: K, load: Callable[[], Awaitable[V | None]]) -> V | None:
        """The cached value, or `load()`'s (kept unless it is None or went stale while
        loading: a change observed meanwhile may postdate what it read)."""
        generation = self._watcher.generation
        if self._generation != generation:
            self._entries.clear()
            self._generation = generation
        if self._watcher.fresh:
            cached = self._entries.get(key)
            if cached is not None:
                self._entries.move_to_end(key)
                return cached
        value = await load()
        if value is not None and self._watcher.generation == generation == self._generation:
            self._entries[key] = value
            self._entries.move_to_end(key)
            if len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._entries)
