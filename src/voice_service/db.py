"""Database engine, sessions and migrations (SQLite by default, PostgreSQL for clusters)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, event, text
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


def create_engine(settings: Settings) -> AsyncEngine:
    url = settings.resolved_database_url
    if not settings.is_sqlite:
        return create_async_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)
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


async def run_in_transaction(settings: Settings, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
    """One unit of work on a migrated database, outside any app (the admin CLI, tests)."""
    engine = create_engine(settings)
    try:
        await migrate(engine)
        async with transaction(session_factory(engine)) as session:
            return await work(session)
    finally:
        await engine.dispose()


async def hold_startup_lock(session: AsyncSession) -> None:
    """On PostgreSQL, serialize start-up writes (migrations, catalogue) of nodes starting
    together until the caller's transaction ends; SQLite serializes writers anyway."""
    if session.get_bind().dialect.name == "postgresql":
        await session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": STARTUP_LOCK})


async def migrate(engine: AsyncEngine) -> None:
    """Bring the schema to the newest revision (idempotent; safe from several nodes)."""
    async with engine.begin() as connection:
        await connection.run_sync(_upgrade)


def _upgrade(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        # Nodes of a cluster may start together; one migrates, the others wait for it.
        # The lock is released when the migration transaction ends.
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": STARTUP_LOCK})
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
