"""One console key per organization, kept so by the database: parallel first uses make one,
and migration 0007 revokes the extra keys that parallel uses made before it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from tests.helpers.app import Tenants, fresh_database, make_settings, running
from tests.helpers.voices import JOE
from voice_service.app import create_app
from voice_service.core.models import ApiKey, UTCDateTime
from voice_service.inference.engines import Engines
from voice_service.kit.db import MIGRATIONS_DIR, create_engine, migrate
from voice_service.settings import Settings
from voice_service.tenancy import service as tenancy
from voice_service.tenancy import users

PASSWORD = "correct horse battery staple"
PARALLEL = 8


@pytest.mark.anyio
async def test_parallel_try_it_requests_make_one_console_key(
    settings: Settings, engines: Engines, tenants: Tenants
) -> None:
    tenant = await tenants.create()
    email = f"{tenant.org_id}@example.com"
    await tenants.run(lambda s: users.create_user(s, tenant.account_id, email, PASSWORD))
    async with running(create_app(settings, engines)) as client:
        console = "http://testserver/console"
        sign_in = await client.get(f"{console}/sign-in")
        signed_in = await client.post(
            f"{console}/sign-in",
            data={"email": email, "password": PASSWORD, "csrf_token": _csrf(sign_in.text)},
        )
        assert signed_in.status_code == 303, signed_in.text
        page = await client.get(f"{console}/orgs/{tenant.org_id}/voices")
        form = {"csrf_token": _csrf(page.text), "text": "Hi.", "voice_id": JOE}
        tries = [
            client.post(f"{console}/orgs/{tenant.org_id}/text-to-speech", data=form)
            for _ in range(PARALLEL)
        ]
        answers = await asyncio.gather(*tries)
    assert [answer.status_code for answer in answers] == [200] * PARALLEL
    keys = await tenants.run(lambda s: tenancy.list_keys(s, tenant.org_id))
    assert sorted(key.kind for key in keys) == ["api", "console"]


def _csrf(html: str) -> str:
    marker = 'name="csrf_token" value="'
    start = html.index(marker) + len(marker)
    return html[start : html.index('"', start)]


# The tables as of revision 0006, for writing rows before 0007 runs.
_meta = sa.MetaData()
_accounts = sa.Table(
    "accounts",
    _meta,
    sa.Column("id", sa.String),
    sa.Column("status", sa.String),
    sa.Column("disabled_services", sa.JSON),
    sa.Column("created_at", UTCDateTime()),
)
_orgs = sa.Table(
    "organizations",
    _meta,
    sa.Column("id", sa.String),
    sa.Column("account_id", sa.String),
    sa.Column("name", sa.String),
    sa.Column("status", sa.String),
    sa.Column("disabled_services", sa.JSON),
    sa.Column("created_at", UTCDateTime()),
)
_keys = sa.Table(
    "api_keys",
    _meta,
    sa.Column("id", sa.String),
    sa.Column("org_id", sa.String),
    sa.Column("name", sa.String),
    sa.Column("prefix", sa.String),
    sa.Column("secret_hash", sa.String),
    sa.Column("kind", sa.String),
    sa.Column("created_at", UTCDateTime()),
    sa.Column("revoked_at", UTCDateTime()),
)
_usage = sa.Table(
    "usage_records",
    _meta,
    sa.Column("request_id", sa.String),
    sa.Column("org_id", sa.String),
    sa.Column("key_id", sa.String),
    sa.Column("endpoint", sa.String),
    sa.Column("units", sa.Integer),
    sa.Column("created_at", UTCDateTime()),
)
_version = sa.Table("tenancy_version", _meta, sa.Column("id"), sa.Column("version"))

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def test_migration_0007_keeps_each_organizations_oldest_console_key(tmp_path: Path) -> None:
    with fresh_database(tmp_path) as url:
        asyncio.run(_migration_0007(make_settings(tmp_path, url)))


async def _migration_0007(settings: Settings) -> None:
    engine = create_engine(settings)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_upgrade_to, "0006")
            await _rows_made_by_racing_first_uses(connection)
            version = await connection.scalar(sa.select(_version.c.version))
        await migrate(engine)
        async with engine.begin() as connection:
            live = await _live_console_keys(connection)
            # The two later keys of org_a are revoked, not deleted: their usage stays billed.
            usage = await connection.execute(sa.select(_usage.c.key_id, _usage.c.units))
            assert sorted(tuple(row) for row in usage) == [
                ("key_a1", 1),
                ("key_a2", 2),
                ("key_a3", 3),
            ]
            assert await connection.scalar(sa.select(_version.c.version)) == version + 1
        assert live == [("org_a", "key_a1"), ("org_b", "key_b1")]
        async with AsyncSession(engine) as session:
            session.add(_console_key("key_a4", "org_a", T0 + timedelta(hours=1)))
            with pytest.raises(IntegrityError):
                await session.commit()
    finally:
        await engine.dispose()


def _upgrade_to(connection: Connection, revision: str) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


async def _rows_made_by_racing_first_uses(connection: AsyncConnection) -> None:
    common: dict[str, Any] = {"status": "active", "disabled_services": [], "created_at": T0}
    await connection.execute(sa.insert(_accounts), [{"id": "acct_1", **common}])
    await connection.execute(
        sa.insert(_orgs),
        [{"id": org, "account_id": "acct_1", "name": org, **common} for org in ("org_a", "org_b")],
    )
    keys = [
        # org_a: three live console keys (inserted out of age order), an older revoked one
        # and a key someone holds; org_b: its one console key.
        _key_row("key_a3", "org_a", "console", T0 + timedelta(seconds=3)),
        _key_row("key_a1", "org_a", "console", T0 + timedelta(seconds=1)),
        _key_row("key_a2", "org_a", "console", T0 + timedelta(seconds=2)),
        _key_row("key_a0", "org_a", "console", T0, revoked_at=T0),
        _key_row("key_ax", "org_a", "api", T0),
        _key_row("key_b1", "org_b", "console", T0 + timedelta(seconds=5)),
    ]
    await connection.execute(sa.insert(_keys), keys)
    await connection.execute(
        sa.insert(_usage),
        [
            {
                "request_id": f"req_{n}",
                "org_id": "org_a",
                "key_id": f"key_a{n}",
                "endpoint": "text-to-speech",
                "units": n,
                "created_at": T0,
            }
            for n in (1, 2, 3)
        ],
    )


def _key_row(
    key_id: str, org_id: str, kind: str, created_at: datetime, revoked_at: datetime | None = None
) -> dict[str, Any]:
    return {
        "id": key_id,
        "org_id": org_id,
        "name": kind,
        "prefix": kind,
        "secret_hash": key_id,
        "kind": kind,
        "created_at": created_at,
        "revoked_at": revoked_at,
    }


def _console_key(key_id: str, org_id: str, created_at: datetime) -> ApiKey:
    return ApiKey(**_key_row(key_id, org_id, "console", created_at))


async def _live_console_keys(connection: AsyncConnection) -> list[tuple[str, str]]:
    rows = await connection.execute(
        sa.select(_keys.c.org_id, _keys.c.id)
        .where(_keys.c.kind == "console", _keys.c.revoked_at.is_(None))
        .order_by(_keys.c.org_id)
    )
    return [tuple(row) for row in rows]
