"""The database a command works on: found where the service keeps it (never made here but
by `serve`), migrated, one transaction per command; its failures as one line."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import typer
from sqlalchemy import inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.cli.shared import refuse
from voice_service.kit import cluster
from voice_service.kit.db import create_engine, run_in_transaction
from voice_service.settings import Settings
from voice_service.tenancy import service as tenancy

T = TypeVar("T")


def run_work(work: Callable[[AsyncSession], Awaitable[T]], *, create: bool = False) -> T:
    """`shared.run_work`: the unit of work on the configured database."""
    settings = Settings()
    try:
        if not create:
            require_database(settings)
        return asyncio.run(run_in_transaction(settings, work))
    except tenancy.UnknownId as exc:
        # A CLI pointed at another database than the service's: say which one it read.
        typer.echo(f"error: {str(exc).rstrip('.')} in {database_named(settings)}.", err=True)
        raise typer.Exit(1) from None
    except (cluster.ClusterMismatch, ValueError) as exc:
        typer.echo(f"error: {exc.args[0] if exc.args else exc}", err=True)
        raise typer.Exit(1) from None
    except (OSError, SQLAlchemyError) as exc:
        # A database server that is down, unreachable or refuses us: one line, no traceback.
        refuse(f"cannot use {database_named(settings)}: {cause(exc)}")


def cause(exc: BaseException) -> str:
    """The driver's own words, on one line."""
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        exc = exc.orig
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


_POINT_IT = (
    "Run this command where `voice-service serve` runs, or point it at the service's data "
    "dir with --data-dir PATH or VOICE_SERVICE_DATA_DIR=PATH"
)


def require_database(settings: Settings) -> None:
    """Exit with a message, creating nothing, unless the database exists (and, on a
    database server, has been migrated by a `serve`)."""
    if not settings.is_sqlite:
        if not asyncio.run(_has_schema(settings)):
            url = make_url(settings.resolved_database_url).render_as_string(hide_password=True)
            refuse(
                f"the database {url} has no Voice Service tables. Start `voice-service "
                "serve` on it first (it creates them), or set VOICE_SERVICE_DATABASE_URL "
                "to the service's database."
            )
        return
    database = make_url(settings.resolved_database_url).database
    if not database or database == ":memory:" or Path(database).is_file():
        return
    if settings.database_url:
        refuse(
            f"no Voice Service database at {database} (VOICE_SERVICE_DATABASE_URL); "
            "nothing was created. Set VOICE_SERVICE_DATABASE_URL to the service's database."
        )
    refuse(
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
