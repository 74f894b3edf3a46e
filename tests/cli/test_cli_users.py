"""Console users, account and organization listings, and the audit log, from the CLI."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession
from typer.testing import CliRunner

from tests.helpers.cli import admin_env
from tests.helpers.voices import JOE
from voice_service.cli import app as cli
from voice_service.cli.serve import _welcome
from voice_service.core.models import User
from voice_service.kit.db import run_in_transaction
from voice_service.settings import Settings
from voice_service.tenancy.audit import Action, record_event
from voice_service.tenancy.users import password_matches


@pytest.fixture
def run(settings: Settings):  # type: ignore[no-untyped-def]
    env = admin_env(settings)
    runner = CliRunner()

    def invoke(*args: str, stdin: str | None = None, ok: bool = True) -> Any:
        result = runner.invoke(cli, [*args, "--json"], env=env, input=stdin)
        if not ok:
            assert result.exit_code == 1, result.output
            return result.stderr
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    return invoke


def user_row(settings: Settings, user_id: str) -> User:
    async def load(session: AsyncSession) -> User:
        user = await session.get(User, user_id)
        assert user is not None
        return user

    return asyncio.run(run_in_transaction(settings, load))


def test_users_create_reads_the_password_from_stdin_or_generates_one(  # type: ignore[no-untyped-def]
    run, settings: Settings
) -> None:
    org = run("orgs", "create", "Acme")
    given = run(
        "users",
        "create",
        org["account_id"],
        "Bob@Example.com",
        "--password-stdin",
        stdin="a long passphrase\n",
    )
    assert given == {"id": given["id"], "email": "bob@example.com", "account_id": org["account_id"]}
    assert password_matches(user_row(settings, given["id"]).password_hash, "a long passphrase")
    generated = run("users", "create", org["account_id"], "carol@example.com")
    assert len(generated["password"]) >= 12
    stored = user_row(settings, generated["id"]).password_hash
    assert password_matches(stored, generated["password"])
    assert generated["password"] not in stored  # hashed (argon2id), never kept as is
    assert stored.startswith("$argon2id$")


def test_short_passwords_and_taken_emails_are_refused(run) -> None:  # type: ignore[no-untyped-def]
    org = run("orgs", "create", "Acme")
    error = run(
        "users",
        "create",
        org["account_id"],
        "d@example.com",
        "--password-stdin",
        stdin="11 chars!!!\n",
        ok=False,
    )
    assert "at least 12 characters" in error
    run("users", "create", org["account_id"], "e@example.com")
    assert "already exists" in run("users", "create", org["account_id"], "E@example.com", ok=False)


def test_list_disable_and_reset_password(run, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    org = run("orgs", "create", "Acme")
    user = run("users", "create", org["account_id"], "f@example.com")
    other = run("orgs", "create", "Elsewhere")
    run("users", "create", other["account_id"], "g@example.com")
    listed = run("users", "list", org["account_id"])
    assert [(u["email"], u["status"]) for u in listed] == [("f@example.com", "active")]
    assert run("users", "disable", user["id"]) == {"id": user["id"], "status": "disabled"}
    assert run("users", "list", org["account_id"])[0]["status"] == "disabled"
    reset = run(
        "users", "reset-password", user["id"], "--password-stdin", stdin="a brand new secret\n"
    )
    stored = user_row(settings, reset["id"]).password_hash
    assert password_matches(stored, "a brand new secret")
    assert not password_matches(stored, user["password"])


def test_accounts_and_orgs_listings(run) -> None:  # type: ignore[no-untyped-def]
    first = run("orgs", "create", "One", "--clone-limit", "3")
    second = run("orgs", "create", "Two", "--account", first["account_id"])
    alone = run("orgs", "create", "Alone")
    accounts = {a["id"]: a["organizations"] for a in run("accounts", "list")}
    assert accounts[first["account_id"]] == 2 and accounts[alone["account_id"]] == 1
    listed = run("orgs", "list", "--account", first["account_id"])
    assert [o["id"] for o in listed] == [first["id"], second["id"]]
    run("accounts", "disable", first["account_id"], "asr")
    run("orgs", "disable", first["id"], "cloning")
    shown = run("orgs", "show", first["id"])
    assert (shown["account_id"], shown["clone_limit"], shown["effective_clone_limit"]) == (
        first["account_id"],
        3,
        3,
    )
    assert shown["disabled_services"] == ["cloning"]
    assert shown["account_disabled_services"] == ["asr"]
    assert run("orgs", "show", second["id"])["effective_clone_limit"] == 10  # the default


def test_audit_lists_an_accounts_events_newest_first(  # type: ignore[no-untyped-def]
    run, settings: Settings
) -> None:
    org = run("orgs", "create", "Acme")
    other = run("orgs", "create", "Other")

    async def record(session: AsyncSession) -> None:
        for action, account in (
            (Action.SIGN_IN, org["account_id"]),
            (Action.KEY_CREATED, org["account_id"]),
            (Action.SIGN_IN, other["account_id"]),
        ):
            record_event(
                session,
                action,
                account_id=account,
                user_id="user_x",
                email="h@example.com",
                target="key_1",
                ip="127.0.0.1",
            )
            await session.flush()

    asyncio.run(run_in_transaction(settings, record))
    events = run("audit", org["account_id"])
    assert [e["action"] for e in events] == ["key_created", "sign_in"]
    assert all(e["email"] == "h@example.com" and e["ip"] == "127.0.0.1" for e in events)


def test_not_found_names_the_database_it_looked_in(run, settings: Settings) -> None:  # type: ignore[no-untyped-def]
    error = run("orgs", "show", "org_nope", ok=False)
    assert "No organization with id 'org_nope'" in error
    if settings.is_sqlite:  # the file the URL names, wherever the data dir is
        assert f"SQLite database {make_url(settings.resolved_database_url).database}" in error
    else:
        assert "postgresql" in error and "postgres:postgres@" not in error
    assert "No account with id" in run("users", "list", "acct_nope", ok=False)


def test_the_first_start_banner_names_the_account_and_a_real_voice() -> None:
    first = {"org_id": "org_1", "account_id": "acct_1", "key_id": "key_1", "api_key": "vs_x"}
    data = {"data_dir": "/srv/voice", "database": "sqlite+aiosqlite:////srv/voice/voice-service.db"}
    root = "http://127.0.0.1:8000/api/v1"
    text = _welcome(root, data, first, ".venv/bin/voice-service")
    assert ".venv/bin/voice-service users create acct_1" in text
    assert "http://127.0.0.1:8000/console/" in text
    assert JOE in text
    later = _welcome(root, data, {"org_id": "org_1", "account_id": "acct_1"}, "vs")
    assert "vs users create acct_1" in later and "vs keys create org_1" in later
    for banner in (text, later):  # where the service keeps its data, on its second line
        assert banner.splitlines()[1] == f"Data dir /srv/voice, database {data['database']}"
