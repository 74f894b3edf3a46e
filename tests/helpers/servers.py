"""`voice-service serve` as a user starts it, in a subprocess, for end-to-end tests."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from bench.procs import answers_ready

from tests.helpers.ports import free_port

CLI = [sys.executable, "-m", "voice_service"]


@dataclass(frozen=True)
class Server:
    base_url: str
    api_key: str
    org_id: str
    account_id: str
    env: dict[str, str]
    process: subprocess.Popen[str]
    data_dir: Path
    log: Path  # the server's stderr

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/api/v1")

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.root.removeprefix("http://").split(":")
        return host, int(port)

    @property
    def pid(self) -> int:
        """One worker: uvicorn serves in the process the CLI started."""
        return self.process.pid

    @property
    def database(self) -> Path:
        return self.data_dir / "voice-service.db"

    def query(self, sql: str, *params: str) -> list[sqlite3.Row]:
        """Rows of the server's database, read-only, as an operator would look."""
        with sqlite3.connect(f"file:{self.database}?mode=ro", uri=True) as db:
            db.row_factory = sqlite3.Row
            return db.execute(sql, params).fetchall()

    def cli(self, *args: str, stdin: str | None = None) -> Any:
        """The admin CLI on the server's data dir, as an operator runs it; its JSON answer."""
        done = subprocess.run(  # noqa: S603
            [*CLI, *args, "--json"],
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(done.stdout)


def _read_json(stream: IO[str] | None, deadline: float) -> dict[str, str]:
    assert stream is not None
    text = ""
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        text += line
        try:
            parsed: dict[str, str] = json.loads(text)
            return parsed
        except json.JSONDecodeError:
            continue
    raise AssertionError(f"serve printed no JSON: {text!r}")


def _wait_ready(root: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        if answers_ready(root):
            return
        time.sleep(0.3)
    raise AssertionError("the server never became ready")


@contextmanager
def running_server(
    data_dir: Path, *, workers: int = 1, redis_url: str | None = None, **settings: str
) -> Iterator[Server]:
    """A first start on an empty SQLite database, as in the README (or a later start on
    `data_dir`: then `api_key` is empty, as serve prints it once), with `settings` as
    VOICE_SERVICE_* variables (e.g. header_timeout_seconds="1"); `workers` > 1 processes
    need the `redis_url` they share."""
    env = {
        **os.environ,
        "VOICE_SERVICE_DATA_DIR": str(data_dir),
        # Always the embedded default here: this is the README's first run.
        "VOICE_SERVICE_DATABASE_URL": f"sqlite+aiosqlite:///{data_dir / 'voice-service.db'}",
        **{f"VOICE_SERVICE_{name.upper()}": value for name, value in settings.items()},
    }
    env.pop("VOICE_SERVICE_REDIS_URL", None)
    if redis_url is not None:
        env["VOICE_SERVICE_REDIS_URL"] = redis_url
    env.pop("VOICE_SERVICE_KEY_PEPPER", None)
    port = free_port()
    log = data_dir / "serve.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(  # noqa: S603
            [*CLI, "serve", "--port", str(port), "--workers", str(workers), "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        first = _read_json(process.stdout, time.monotonic() + 60)
        _wait_ready(f"http://127.0.0.1:{port}", time.monotonic() + 120)
        yield Server(
            first["base_url"],
            first.get("api_key", ""),  # printed on the first start only
            first["org_id"],
            first["account_id"],
            env,
            process,
            data_dir,
            log,
        )
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # still draining a long request: not left behind
            process.kill()
            process.wait()


def serve_refusal(data_dir: Path, **settings: str) -> str:
    """What `voice-service serve` on `data_dir` says as it refuses to start with `settings`
    (as VOICE_SERVICE_* variables)."""
    env = {
        "PATH": "/usr/bin:/bin",
        "VOICE_SERVICE_DATA_DIR": str(data_dir),
        **{f"VOICE_SERVICE_{name.upper()}": value for name, value in settings.items()},
    }
    served = subprocess.run(  # noqa: S603
        [*CLI, "serve", "--port", "0"], env=env, capture_output=True, text=True, timeout=120
    )
    assert served.returncode == 1
    return served.stderr.strip()
