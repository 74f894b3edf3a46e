"""Database engine, sessions and migrations (SQLite by default, PostgreSQL for clusters)."""

from __future__ import annotations

import asyncio
import fcntl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Insert, event, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from voice_service.settings import Settings

T = TypeVar("T")

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
STARTUP_LOCK = 7262011  # an arbitrary advisory-lock key owned by this service
# Migrations and start-up work wait on other nodes' turns under the start-up lock.
STARTUP_STATEMENT_TIMEOUT = 300.0


def create_engine(settings: Settings, statement_timeout: float | None = None) -> AsyncEngine:
    """The engine requests use. On PostgreSQL every connect, statement and pool checkout
    is bounded (a black-holed server must cost a request seconds, not forever); start-up
    work that waits on other nodes passes a longer `statement_timeout`."""
    url = settings.resolved_database_url
    if not settings.is_sqlite:
        timeout = settings.db_timeout_seconds
        return create_async_engine(
            url,
            pool_pre_ping=True,
            pool_size=settings.db_pool_size,
            max_overflow=settings.db_max_overflow,
            pool_timeout=settings.db_pool_timeout_seconds,
            connect_args={
                "timeout": timeout,
                "command_timeout": statement_timeout or timeout,
            },
        )
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = create_async_engine(url, connect_args={"timeout": 30})
    event.listen(engine.sync_engine, "connect", _configure_sqlite)
    return engine


def _configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets readers proceed during a write; FULL makes a committed usage row survive a
    # power cut; busy_timeout queues concurrent writers instead of failing them.
    cursor = dbapi_connection.cursor()
    for pragma in (
        "journal_mode=WAL",
        "synchronous=FULL",
        "foreign_keys=ON",
        "busy_timeout=30000",
    ):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)


@asynccontextmanager
async def transaction(
    sessions: async_sessionmaker[AsyncSession],
) -> AsyncIterator[AsyncSession]:
    """One unit of work: commits on success, rolls back on any exception."""
    async with sessions() as session, session.begin():
        yield session


def insert_if_absent(session: AsyncSession, model: type[Any]) -> Insert:
    """An INSERT that skips rows whose key exists (PostgreSQL and SQLite alike)."""
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    return insert(model).on_conflict_do_nothing()


async def run_in_transaction(settings: Settings, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
    """One unit of work on a migrated database, outside any app (the admin CLI, tests)."""
    engine = create_engine(settings, STARTUP_STATEMENT_TIMEOUT)
    try:
        await migrate(engine)
        async with transaction(session_factory(engine)) as session:
            return await work(session)
    finally:
        await engine.dispose()


async def hold_startup_lock(session: AsyncSession) -> None:
    """Serialize the start-up work (catalogue, first organization, cluster checks) of
    nodes and processes starting together, until the caller's transaction ends.

    PostgreSQL: an advisory lock. SQLite: its one write lock, taken by a write that changes
    nothing, before anything is read: a transaction that had read first would fail, not
    wait, once another process committed (WAL's stale-snapshot rule)."""
    if session.get_bind().dialect.name == "postgresql":
        await session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": STARTUP_LOCK})
    else:
        await session.execute(text("DELETE FROM service_meta WHERE 1 = 0"))


async def migrate(engine: AsyncEngine) -> None:
    """Bring the schema to the newest revision (idempotent; safe from several nodes)."""
    async with _sqlite_migration_lock(engine), engine.begin() as connection:
        await connection.run_sync(_upgrade)


@asynccontextmanager
async def _sqlite_migration_lock(engine: AsyncEngine) -> AsyncIterator[None]:
    """Processes migrating one SQLite file take turns (PostgreSQL: see `_upgrade`). SQLite
    runs Alembic's DDL outside a transaction, so two processes starting on a new file both
    created the tables and one failed; a file lock beside the database serializes them."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        yield
        return
    lock = await asyncio.to_thread(Path(f"{database}.migrate-lock").open, "a")
    try:
        await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_EX)
        yield
    finally:
        lock.close()  # closing the file releases the lock


def _upgrade(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        # Nodes of a cluster may start together; one migrates, the others wait for it.
        # The lock is released when the migration transaction ends.
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": STARTUP_LOCK})
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
