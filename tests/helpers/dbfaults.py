"""Real database failures on demand: a trigger that makes the database itself refuse
request-log rows, on SQLite and PostgreSQL alike."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from tests.helpers.app import Tenants

TRIGGER = "refuse_log_rows"


@asynccontextmanager
async def refusing_log_rows(tenants: Tenants, when: str | None = None) -> AsyncIterator[None]:
    """Until exit, INSERTs into request_log fail: every one, or those whose row matches
    `when`, an SQL condition on NEW (e.g. "NEW.status = 200")."""
    await tenants.run(lambda session: _create(session, when))
    try:
        yield
    finally:
        await tenants.run(_drop)


async def _create(session: AsyncSession, when: str | None) -> None:
    if session.get_bind().dialect.name == "postgresql":
        await session.execute(
            text(
                f"CREATE FUNCTION {TRIGGER}() RETURNS trigger AS $$ BEGIN "
                "RAISE EXCEPTION 'request_log refused by the test'; END $$ LANGUAGE plpgsql"
            )
        )
        condition = f"WHEN ({when})" if when else ""
        await session.execute(
            text(
                f"CREATE TRIGGER {TRIGGER} BEFORE INSERT ON request_log FOR EACH ROW {condition} "
                f"EXECUTE FUNCTION {TRIGGER}()"
            )
        )
    else:
        condition = f"WHEN {when}" if when else ""
        await session.execute(
            text(
                f"CREATE TRIGGER {TRIGGER} BEFORE INSERT ON request_log {condition} BEGIN "
                "SELECT RAISE(ABORT, 'request_log refused by the test'); END"
            )
        )


async def _drop(session: AsyncSession) -> None:
    await session.execute(text(f"DROP TRIGGER {TRIGGER}" + _on_table(session)))
    if session.get_bind().dialect.name == "postgresql":
        await session.execute(text(f"DROP FUNCTION {TRIGGER}()"))


def _on_table(session: AsyncSession) -> str:
    return " ON request_log" if session.get_bind().dialect.name == "postgresql" else ""
