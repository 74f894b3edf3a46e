"""The database a command works on (`store.py`), its failures told as one line."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import typer
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service import store
from voice_service.cli.shared import refuse
from voice_service.kit import cluster
from voice_service.settings import Settings
from voice_service.tenancy import service as tenancy

T = TypeVar("T")


def run_work(work: Callable[[AsyncSession], Awaitable[T]], *, create: bool = False) -> T:
    """`shared.run_work`: the unit of work on the configured database."""
    settings = Settings()
    try:
        return asyncio.run(store.run_work(settings, work, create=create))
    except store.NoDatabase as exc:
        refuse(str(exc))
    except tenancy.UnknownId as exc:
        # A CLI pointed at another database than the service's: say which one it read.
        typer.echo(f"error: {str(exc).rstrip('.')} in {store.database_named(settings)}.", err=True)
        raise typer.Exit(1) from None
    except (cluster.ClusterMismatch, ValueError) as exc:
        typer.echo(f"error: {exc.args[0] if exc.args else exc}", err=True)
        raise typer.Exit(1) from None
    except (OSError, SQLAlchemyError) as exc:
        # A database server that is down, unreachable or refuses us: one line, no traceback.
        refuse(f"cannot use {store.database_named(settings)}: {store.cause(exc)}")
