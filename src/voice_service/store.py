"""The service's database for work outside a running server (the command line): found where
`serve` keeps it and never created but by `serve`, migrated, one transaction per unit of work."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from sqlalchemy import inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.kit.db import create_engine, run_in_transaction
from voice_service.settings import Settings

T = TypeVar("T")

_POINT_IT = (
    "Run this command where `voice-service serve` runs, or point it at the service's data "
    "dir with --data-dir PATH or VOICE_SERVICE_DATA_DIR=PATH"
)


class NoDatabase(Exception):
    """The configured database is not the service's: nothing there, or never migrated."""


async def run_work(
    settings: Settings, work: Callable[[AsyncSession], Awaitable[T]], *, create: bool = False
) -> T:
    """`work` in one transaction on the configured database, migrated first. Only `serve`
    may `create` it: elsewhere a missing database is a data dir mistaken for another."""
    if not create:
        await require_database(settings)
    return await run_in_transaction(settings, work)


async def require_database(settings: Settings) -> None:
    """Raise `NoDatabase`, creating nothing, unless the database exists (and, on a database
    server, has been migrated by a `serve`)."""
    if settings.is_sqlite:
        _require_sqlite_file(settings)
    elif not await _has_schema(settings):
        url = make_url(settings.resolved_database_url).render_as_string(hide_password=True)
        raise NoDatabase(
            f"the database {url} has no Voice Service tables. Start `voice-service "
            "serve` on it first (it creates them), or set VOICE_SERVICE_DATABASE_URL "
            "to the service's database."
        )


def _require_sqlite_file(settings: Settings) -> None:
    database = make_url(settings.resolved_database_url).database
    if not database or database == ":memory:" or Path(database).is_file():
        return
    if settings.database_url:
        raise NoDatabase(
            f"no Voice Service database at {database} (VOICE_SERVICE_DATABASE_URL); "
            "nothing was created. Set VOICE_SERVICE_DATABASE_URL to the service's database."
        )
    raise NoDatabase(
        f"no Voice Service database in the data dir {settings.data_dir.resolve()} (looked for "
        f"{database}); nothing was created. {_POINT_IT}."
    )


async def _has_schema(settings: Settings) -> bool:
    engine = create_engine(settings)
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(
                lambda sync: inspect(sync).has_table("alembic_version")
            )
    finally:
        await engine.dispose()


def database_named(settings: Settings) -> str:
    if settings.is_sqlite:
        return (
            f"the SQLite database {make_url(settings.resolved_database_url).database} "
            "(--data-dir, VOICE_SERVICE_DATA_DIR or VOICE_SERVICE_DATABASE_URL choose another)"
        )
    url = make_url(settings.resolved_database_url).render_as_string(hide_password=True)
    return f"the database {url}"


def cause(exc: BaseException) -> str:
    """The driver's own words, on one line."""
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        exc = exc.orig
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
