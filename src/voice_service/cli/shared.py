"""What every command shares: its options and arguments, how it fails, how it prints.

Only Typer and the standard library are imported here, and the command modules import the
rest inside each command: `voice-service --help` and an admin command then start without
SQLAlchemy, Alembic, pydantic or uvicorn where they do not use them (the test's list is in
tests/cli/test_cli_imports.py). The database is reached through `run_work`, which imports it
(`store.py`)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import date
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

T = TypeVar("T")

# Click's plain help: Typer's rich boxes print `<bool>` beside every flag.
PLAIN_HELP: Any = {"no_args_is_help": True, "rich_markup_mode": None}

JsonFlag = Annotated[bool, typer.Option("--json", help="Print only JSON on stdout.")]
# Positional arguments, named alike in every command's help.
OrgId = Annotated[str, typer.Argument(metavar="ORG_ID")]
AccountId = Annotated[str, typer.Argument(metavar="ACCOUNT_ID")]
KeyId = Annotated[str, typer.Argument(metavar="KEY_ID")]
UserId = Annotated[str, typer.Argument(metavar="USER_ID")]
MAX_INT32 = 2**31 - 1
MonthlyUnits = Annotated[
    int | None,
    typer.Option(
        min=0,
        max=MAX_INT32,  # the column's range on PostgreSQL
        help="Billed units allowed per UTC calendar month (default: no cap).",
    ),
]


def run_work(work: Callable[[AsyncSession], Awaitable[T]], *, create: bool = False) -> T:
    """Run one unit of work against the configured database, migrated first (`store.py`),
    its failures told as one line. Only `serve` may `create` it: elsewhere a missing
    database is a data dir mistaken for another."""
    import asyncio

    from sqlalchemy.exc import SQLAlchemyError

    from voice_service import store
    from voice_service.kit.cluster import ClusterMismatch
    from voice_service.settings import Settings
    from voice_service.tenancy.service import UnknownId

    settings = Settings()
    try:
        return asyncio.run(store.run_work(settings, work, create=create))
    except store.NoDatabase as exc:
        refuse(str(exc))
    except UnknownId as exc:
        # A CLI pointed at another database than the service's: say which one it read.
        refuse(f"{str(exc).rstrip('.')} in {store.database_named(settings)}.")
    except (ClusterMismatch, ValueError) as exc:
        refuse(str(exc.args[0] if exc.args else exc))
    except (OSError, SQLAlchemyError) as exc:
        # A database server that is down, unreachable or refuses us: one line, no traceback.
        refuse(f"cannot use {store.database_named(settings)}: {store.cause(exc)}")


def refuse(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def shown(text: str) -> str:
    """A name a tenant chose, safe to print on an operator's terminal: control characters
    (an escape sequence could rewrite the screen) shown as U+FFFD."""
    return "".join(char if char.isprintable() else "\ufffd" for char in text)


def emit(as_json: bool, data: Any, text: str) -> None:
    typer.echo(json.dumps(data, default=_json_default, indent=2) if as_json else text)


def _json_default(value: object) -> str:
    if isinstance(value, date):  # datetimes too
        return value.isoformat()
    raise TypeError(type(value).__name__)
