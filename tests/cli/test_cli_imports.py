"""The admin CLI starts quickly: its help imports nothing but Typer's, and an admin command
only what reaches the database. Measured as the modules a fresh interpreter has imported
once the command has run (what takes the time), not as seconds, which vary by machine."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from tests.helpers.cli import admin_env, unconfigured_env
from voice_service.cli import app as cli
from voice_service.settings import Settings

# Inference: the engines and what they run on.
ENGINES = ("numpy", "scipy", "av", "onnxruntime", "ctranslate2", "faster_whisper", "piper")
# The web server, its metrics, and the console's password hashing.
SERVER = ("uvicorn", "fastapi", "starlette", "prometheus_client", "argon2")
# The database and the settings: what an admin command needs, and its help does not
# (pydantic itself may be imported: Typer converts some parameters with it).
DATABASE = ("sqlalchemy", "alembic", "pydantic_settings")

_RUN = """
import json, sys
from voice_service.cli import app
watched, args = json.loads(sys.argv[1]), sys.argv[2:]
code = 0
try:
    app(args)
except SystemExit as exit:
    code = exit.code or 0
print(json.dumps({"code": code, "imported": sorted(set(watched) & set(sys.modules))}))
"""


def imported_by(args: list[str], watched: tuple[str, ...], env: dict[str, str]) -> list[str]:
    """Of `watched`, the modules `voice-service ARGS` imports, in a fresh interpreter; the
    command must succeed."""
    done = subprocess.run(  # noqa: S603
        [sys.executable, "-c", _RUN, json.dumps(watched), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["code"] == 0, done.stdout + done.stderr
    imported: list[str] = outcome["imported"]
    return imported


@pytest.mark.parametrize("args", [["--help"], ["orgs", "--help"], ["serve", "--help"]])
def test_help_imports_neither_the_database_nor_the_server_nor_an_engine(args: list[str]) -> None:
    assert imported_by(args, DATABASE + SERVER + ENGINES, unconfigured_env()) == []


@pytest.mark.parametrize(
    "args",
    [
        ["orgs", "list"],
        ["accounts", "list"],
        ["keys", "list", "ORG"],
        ["usage", "ORG"],
        ["requests", "ORG"],
    ],
)
def test_admin_commands_import_neither_the_server_nor_an_engine(
    settings: Settings, args: list[str]
) -> None:
    env = admin_env(settings)
    made = CliRunner().invoke(cli, ["orgs", "create", "Acme", "--json"], env=env)
    assert made.exit_code == 0, made.output
    org = json.loads(made.stdout)["id"]
    args = [org if arg == "ORG" else arg for arg in args]
    assert imported_by(args, SERVER + ENGINES, unconfigured_env(**env)) == []
