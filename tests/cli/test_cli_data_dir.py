"""The admin CLI finds the service's database or says where it looked: run from another
directory it must not make a new, empty data dir and answer from it."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from tests.helpers.app import fresh_database
from tests.helpers.cli import unconfigured_env, voice_service
from voice_service.kit.db import run_in_transaction
from voice_service.settings import Settings
from voice_service.tenancy import service as tenancy


@pytest.mark.parametrize(
    "args",
    [
        ("accounts", "list"),  # what the newcomer ran: it answered "no accounts"
        ("users", "create", "acct_x", "a@example.com"),  # a command that writes
    ],
)
def test_a_command_run_elsewhere_refuses_and_creates_nothing(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    done = voice_service(*args, cwd=tmp_path, env=unconfigured_env())
    assert done.returncode != 0
    assert done.stdout == ""
    assert f"no Voice Service database in the data dir {tmp_path / 'data'}" in done.stderr
    assert "--data-dir" in done.stderr and "VOICE_SERVICE_DATA_DIR" in done.stderr
    assert list(tmp_path.iterdir()) == []  # no data dir, pepper or database


def test_the_data_dir_option_and_variable_find_the_service(tmp_path: Path) -> None:
    service = tmp_path / "service-data"
    settings = Settings(data_dir=service, database_url=None, key_pepper=None, redis_url=None)
    org = asyncio.run(run_in_transaction(settings, _make_org))  # as serve makes its first
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    by_option = voice_service(
        "--data-dir", str(service), "orgs", "list", "--json", cwd=elsewhere, env=unconfigured_env()
    )
    assert by_option.returncode == 0, by_option.stderr
    assert [o["id"] for o in json.loads(by_option.stdout)] == [org]
    by_variable = voice_service(
        "orgs",
        "list",
        "--json",
        cwd=elsewhere,
        env=unconfigured_env(VOICE_SERVICE_DATA_DIR=str(service)),
    )
    assert json.loads(by_variable.stdout) == json.loads(by_option.stdout)
    assert list(elsewhere.iterdir()) == []


async def _make_org(session: AsyncSession) -> str:
    return (await tenancy.create_org(session, "Acme", None, None)).id


def test_a_database_url_with_no_service_tables_is_refused(tmp_path: Path) -> None:
    # On the suite's backend: a SQLite file not there, or a new, empty PostgreSQL database.
    with fresh_database(tmp_path) as url:
        env = unconfigured_env(VOICE_SERVICE_DATABASE_URL=url, VOICE_SERVICE_KEY_PEPPER="p")
        for _ in range(2):  # had the first run made the tables, the second would pass
            done = voice_service("accounts", "list", cwd=tmp_path, env=env)
            assert done.returncode != 0 and done.stdout == ""
            assert "VOICE_SERVICE_DATABASE_URL" in done.stderr
            if url.startswith("sqlite"):
                assert "no Voice Service database at" in done.stderr
            else:
                assert "has no Voice Service tables" in done.stderr
        assert list(tmp_path.iterdir()) == []


def test_a_database_server_that_does_not_answer_is_one_line_not_a_traceback(
    tmp_path: Path,
) -> None:
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    url = f"postgresql+asyncpg://voice:secret@127.0.0.1:{port}/voice"
    done = voice_service(
        "accounts", "list", cwd=tmp_path, env=unconfigured_env(VOICE_SERVICE_DATABASE_URL=url)
    )
    assert done.returncode == 1
    assert done.stdout == ""
    message = done.stderr.strip()
    assert message.startswith(
        f"error: cannot use the database postgresql+asyncpg://voice:***@127.0.0.1:{port}/voice: "
    )
    assert "\n" not in message and "secret" not in message
