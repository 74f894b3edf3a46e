"""The per-process tenancy caches: what they serve, and when they stop serving it.

The bound across nodes is proved on a real cluster in tests/cluster/test_invalidation.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.helpers.app import Tenant, running
from voice_service.kit.db import create_engine, migrate, session_factory, transaction
from voice_service.settings import Settings
from voice_service.tenancy.cache import (
    MAX_STALENESS_SECONDS,
    FreshCache,
    TenancyWatcher,
    record_change,
)
from voice_service.web.context import AppContext

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Loader:
    """Returns `value` and counts its calls."""

    def __init__(self, value: str | None = "value") -> None:
        self.value = value
        self.calls = 0

    async def __call__(self) -> str | None:
        self.calls += 1
        return self.value


@pytest.fixture
async def db(settings: Settings) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(settings)
    await migrate(engine)
    yield engine
    await engine.dispose()


@pytest.fixture
async def watcher(db: AsyncEngine) -> TenancyWatcher:
    watcher = TenancyWatcher(db, clock=Clock())
    await watcher.read_version()
    return watcher


async def bump_elsewhere(db: AsyncEngine) -> None:
    """What another process's change does to this one: the counter moves, and nothing in
    this process hears of it (no ORM session commits here)."""
    async with db.begin() as connection:
        await connection.execute(text("UPDATE tenancy_version SET version = version + 1"))


async def test_a_value_is_loaded_once_while_nothing_changes(watcher: TenancyWatcher) -> None:
    cache: FreshCache[str, str] = FreshCache(watcher, max_entries=10)
    load = Loader()
    for _ in range(3):
        assert await cache.get("key", load) == "value"
    assert load.calls == 1


async def test_a_change_committed_elsewhere_is_seen_at_the_next_read_of_the_version(
    db: AsyncEngine, watcher: TenancyWatcher
) -> None:
    cache: FreshCache[str, str] = FreshCache(watcher, max_entries=10)
    load = Loader()
    await cache.get("key", load)
    await bump_elsewhere(db)
    await cache.get("key", load)
    assert load.calls == 1  # not read yet: the staleness bound covers this window
    await watcher.read_version()
    await cache.get("key", load)
    assert load.calls == 2


async def test_nothing_is_served_once_the_version_went_unread_past_the_bound(
    db: AsyncEngine,
) -> None:
    clock = Clock()
    watcher = TenancyWatcher(db, clock=clock)
    cache: FreshCache[str, str] = FreshCache(watcher, max_entries=10)
    load = Loader()
    await cache.get("key", load)
    await cache.get("key", load)
    assert load.calls == 2  # never read: a database that does not answer
    await watcher.read_version()
    await cache.get("key", load)
    assert load.calls == 3  # fresh now, but loaded under an unread version
    await cache.get("key", load)
    assert load.calls == 3
    clock.now += MAX_STALENESS_SECONDS + 0.01
    await cache.get("key", load)
    assert load.calls == 4


async def test_a_change_observed_while_loading_keeps_the_loaded_value_out(
    db: AsyncEngine, watcher: TenancyWatcher
) -> None:
    cache: FreshCache[str, str] = FreshCache(watcher, max_entries=10)
    calls = 0

    async def load_across_a_change() -> str:
        # The value was read before the change; the watcher sees the change before the
        # value is stored.
        nonlocal calls
        calls += 1
        await bump_elsewhere(db)
        await watcher.read_version()
        return "old"

    await cache.get("key", load_across_a_change)
    await cache.get("key", load_across_a_change)
    assert calls == 2
    assert len(cache) == 0


async def test_a_change_committed_in_this_process_drops_its_caches_at_once(
    db: AsyncEngine, watcher: TenancyWatcher
) -> None:
    cache: FreshCache[str, str] = FreshCache(watcher, max_entries=10)
    load = Loader()
    await cache.get("key", load)
    async with transaction(session_factory(db)) as session:
        await record_change(session)
    await cache.get("key", load)
    assert load.calls == 2


async def test_a_rolled_back_change_drops_nothing(db: AsyncEngine, watcher: TenancyWatcher) -> None:
    cache: FreshCache[str, str] = FreshCache(watcher, max_entries=10)
    load = Loader()
    await cache.get("key", load)
    with pytest.raises(RuntimeError):
        await _change_then_fail(db)
    generation = watcher.generation
    await watcher.read_version()
    assert watcher.generation == generation
    await cache.get("key", load)
    assert load.calls == 1


async def _change_then_fail(db: AsyncEngine) -> None:
    async with transaction(session_factory(db)) as session:
        await record_change(session)
        raise RuntimeError


async def test_unknown_keys_are_not_cached(watcher: TenancyWatcher) -> None:
    cache: FreshCache[str, str] = FreshCache(watcher, max_entries=10)
    load = Loader(value=None)
    await cache.get("key", load)
    await cache.get("key", load)
    assert load.calls == 2


async def test_the_least_recently_used_entry_goes_first(watcher: TenancyWatcher) -> None:
    cache: FreshCache[str, str] = FreshCache(watcher, max_entries=2)
    loads = {name: Loader(name) for name in "abc"}
    await cache.get("a", loads["a"])
    await cache.get("b", loads["b"])
    await cache.get("a", loads["a"])  # b is now the least recently used
    await cache.get("c", loads["c"])
    await cache.get("a", loads["a"])
    await cache.get("b", loads["b"])
    assert (loads["a"].calls, loads["b"].calls, loads["c"].calls) == (1, 2, 1)
    assert len(cache) == 2


async def test_a_cached_listing_reads_neither_the_key_nor_the_voices_from_the_database(
    app: FastAPI, tenant: Tenant
) -> None:
    context: AppContext = app.state.context
    async with running(app) as client:
        await context.tenancy.read_version()  # what its task does five times a second
        assert (await client.get("/voices", headers=tenant.headers)).status_code == 200
        statements = await _statements_during(
            context, client.get("/voices", headers=tenant.headers)
        )
    # Its request-log row is still written (on SQLite by the log's own writer thread).
    assert not [s for s in statements if s.startswith("SELECT")]


BACKGROUND_TABLES = (
    "tenancy_version",
    "queue_jobs",
    "queue_workers",
    "transcription_jobs",
    "blob_chunks",
)


async def _statements_during(context: AppContext, request: Any) -> list[str]:
    statements: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        # Not the background tasks' own: the tenancy watcher's, the job and webhook queues'
        # polls and the jobs' sweep.
        if not any(table in statement for table in BACKGROUND_TABLES):
            statements.append(statement.strip())

    event.listen(context.db.sync_engine, "before_cursor_execute", record)
    try:
        response: httpx.Response = await request
        assert response.status_code == 200
    finally:
        event.remove(context.db.sync_engine, "before_cursor_execute", record)
    return statements
