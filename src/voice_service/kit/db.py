"""Database engine, sessions and migrations (SQLite by default, PostgreSQL for clusters)."""

from __future__ import annotations

import asyncio
import fcntl
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

import sqlalchemy
from alembic import command
from alembic.config import Config
from sqlalchemy import (
    ColumnElement,
    Connection,
    Dialect,
    Insert,
    Table,
    TextClause,
    event,
    make_url,
    text,
)
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


class SqliteWriteThread:
    """Transactions on the SQLite file, each run whole in one thread of its own.

    Through aiosqlite every statement, the commit and the connection's reset is a trip to
    its thread and back through the event loop; for the request log's group commit, the
    one write on every request's path, those trips were most of a batch's time. Here a
    transaction costs one trip."""

    def __init__(self, settings: Settings) -> None:
        url = make_url(settings.resolved_database_url).set(drivername="sqlite")
        self._engine = sqlalchemy.create_engine(url, connect_args={"timeout": 30})
        event.listen(self._engine, "connect", _configure_sqlite)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-writer")
        self._turns = Path(f"{url.database}.write-turns")
        self._turns_file: IO[str] | None = None

    async def run(self, work: Callable[[Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, self._in_transaction, work)

    def _in_transaction(self, work: Callable[[Connection], T]) -> T:
        # The processes of `serve --workers N` take turns on a file lock, woken as soon as
        # it is free: SQLite's own busy handler polls with sleeps of up to 100 ms, and the
        # log writers of two workers then spent most of their time asleep.
        if self._turns_file is None:
            self._turns_file = self._turns.open("a")
        fcntl.flock(self._turns_file, fcntl.LOCK_EX)
        try:
            with self._engine.begin() as connection:
                return work(connection)
        finally:
            fcntl.flock(self._turns_file, fcntl.LOCK_UN)

    def close(self) -> None:
        self._thread.shutdown(wait=True)
        self._engine.dispose()
        if self._turns_file is not None:
            self._turns_file.close()


@asynccontextmanager
async def transaction(
    sessions: async_sessionmaker[AsyncSession],
) -> AsyncIterator[AsyncSession]:
    """One unit of work: commits on success, rolls back on any exception."""
    async with sessions() as session, session.begin():
        yield session


def insert_if_absent(
    dialect: Dialect,
    model: type[Any] | Table,
    *,
    index_elements: list[str] | None = None,
    index_where: ColumnElement[bool] | TextClause | None = None,
) -> Insert:
    """An INSERT that skips rows whose key exists (PostgreSQL and SQLite alike): any key,
    or only the unique index on `index_elements` (partial: `index_where`), so that a
    conflict on another one still fails."""
    insert = postgresql.insert if dialect.name == "postgresql" else sqlite.insert
    return insert(model).on_conflict_do_nothing(
        index_elements=index_elements, index_where=index_where
    )


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
