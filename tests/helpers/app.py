"""The app in the test process: settings, a fresh database, tenants made through the
service the admin CLI uses.

The suite runs on SQLite by default. With VOICE_SERVICE_DATABASE_URL pointing at a
PostgreSQL server each fresh database is made there, and with VOICE_SERVICE_REDIS_URL the
rate limits live in that Redis.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
from fastapi import FastAPI
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.vocabulary import Scope
from voice_service.kit.db import run_in_transaction
from voice_service.settings import Settings
from voice_service.tenancy import service as tenancy
from voice_service.tenancy.keys import SecretHasher

TEST_PEPPER = "test-pepper"
REDIS_URL = os.environ.get("VOICE_SERVICE_REDIS_URL")
T = TypeVar("T")


@contextmanager
def fresh_database(directory: Path) -> Iterator[str]:
    """An empty database on the suite's backend: a SQLite file in `directory`, or a new
    database on the PostgreSQL server VOICE_SERVICE_DATABASE_URL names, dropped after."""
    server_url = os.environ.get("VOICE_SERVICE_DATABASE_URL")
    if not server_url:
        yield f"sqlite+aiosqlite:///{directory / 'voice-service.db'}"
        return
    name = f"voice_service_test_{secrets.token_hex(4)}"
    asyncio.run(_admin_sql(server_url, f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_admin_sql(server_url, f'DROP DATABASE "{name}" WITH (FORCE)'))


async def _admin_sql(server_url: str, statement: str) -> None:
    async with _postgres(server_url) as connection:
        await connection.execute(statement)


async def postgres_rows(
    database_url: str, statement: str, *params: object
) -> list[tuple[Any, ...]]:
    """What `statement` returns on the PostgreSQL database `database_url` names."""
    async with _postgres(database_url) as connection:
        return [tuple(row) for row in await connection.fetch(statement, *params)]


@asynccontextmanager
async def postgres_row_locked(
    database_url: str, table: str, row_id: str
) -> AsyncIterator[Callable[[int], Awaitable[None]]]:
    """The row of `table` with id `row_id` locked (FOR UPDATE) by a transaction of its own
    until the block ends. Inside, `await waiting(n)` returns once `n` other sessions of the
    database wait for a lock in a statement naming `table`: the server's own evidence of
    where each has got to."""
    async with _postgres(database_url) as holder, holder.transaction():
        await holder.execute(f"SELECT 1 FROM {table} WHERE id = $1 FOR UPDATE", row_id)  # noqa: S608

        async def waiting(count: int) -> None:
            async with asyncio.timeout(60):
                while True:
                    waiters = await holder.fetchval(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                        "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' "
                        "AND query ILIKE $1",
                        f"%{table}%",
                    )
                    if waiters >= count:
                        return
                    # Statistics are read once a transaction, and this one is still open.
                    await holder.execute("SELECT pg_stat_clear_snapshot()")
                    await asyncio.sleep(0.01)

        yield waiting


@asynccontextmanager
async def _postgres(database_url: str) -> AsyncIterator[Any]:
    import asyncpg

    url = make_url(database_url)
    connection = await asyncpg.connect(
        host=url.host,
        port=url.port,
        user=url.username,
        password=url.password,
        database=url.database,
    )
    try:
        yield connection
    finally:
        await connection.close()


def make_settings(data_dir: Path, database_url: str, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "data_dir": data_dir,
        "database_url": database_url,
        "redis_url": REDIS_URL,
        "key_pepper": TEST_PEPPER,
        "pool_size": 2,
        # Deadlines are wall-clock: on a loaded machine the default could stop ordinary
        # work. Tests of the deadline itself set budgets no machine can meet.
        "inference_timeout_seconds": 3600.0,
        # Likewise a log batch past this goes to the spool, and its row reaches the database
        # a second later: tests that read a row right after its answer would race that.
        "db_timeout_seconds": 30.0,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@asynccontextmanager
async def running(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its lifespan run, and a client whose base URL is the API's."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://testserver/api/v1", timeout=120
        ) as client:
            yield client


@dataclass(frozen=True)
class Tenant:
    account_id: str
    org_id: str
    key_id: str
    secret: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secret}"}


class Tenants:
    """Makes organizations and keys through the same service the admin CLI uses."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    async def create(
        self,
        *,
        account_id: str | None = None,
        rate_limit: int | None = None,
        clone_limit: int | None = None,
    ) -> Tenant:
        async def work(session: AsyncSession) -> Tenant:
            org = await tenancy.create_org(session, "test org", account_id, clone_limit)
            return await self._key(session, org.id, org.account_id, rate_limit)

        return await self.run(work)

    async def add_key(
        self,
        tenant: Tenant,
        rate_limit: int | None = None,
        *,
        scopes: Sequence[Scope] | None = None,
        monthly_units: int | None = None,
        name: str | None = None,
    ) -> Tenant:
        """Another key of `tenant`'s organization."""
        return await self.run(
            lambda s: self._key(
                s, tenant.org_id, tenant.account_id, rate_limit, scopes, monthly_units, name
            )
        )

    async def _key(
        self,
        session: AsyncSession,
        org_id: str,
        account_id: str,
        rate_limit: int | None,
        scopes: Sequence[Scope] | None = None,
        monthly_units: int | None = None,
        name: str | None = None,
    ) -> Tenant:
        created = await tenancy.create_key(
            session,
            SecretHasher(TEST_PEPPER.encode()),
            org_id,
            name,
            rate_limit,
            scopes=scopes,
            monthly_units=monthly_units,
        )
        return Tenant(account_id, org_id, created.key.id, created.secret)

    async def run(self, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
        return await run_in_transaction(self.settings, work)
