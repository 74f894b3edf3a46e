"""`voice-service serve` starting as a newcomer starts it: the README's command in a fresh
directory, nothing configured. A busy port, or a data dir another serve holds, is refused
before anything is loaded, written or announced; the banner comes once connections are
accepted, and the commands it prints run as printed."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.cli import SCRIPT, unconfigured_env, voice_service
from tests.helpers.ports import free_port

BANNER = re.compile(r"Voice Service on http://127\.0\.0\.1:(\d+)/api/v1 ")
# uvicorn's line as the app's lifespan (migrations, model loading) begins.
LIFESPAN_STARTS = "Waiting for application startup"
# uvicorn's line once the lifespan is done: the node is ready.
READY = "Application startup complete"
README_SCRIPT = ".venv/bin/voice-service"


def _env() -> dict[str, str]:
    # The README's shell: the virtual environment not activated, so its bin is not on PATH.
    path = os.pathsep.join(
        d for d in os.environ.get("PATH", "").split(os.pathsep) if Path(d) != SCRIPT.parent
    )
    # Piper alone: these serves are stopped long before their models matter.
    return unconfigured_env(PATH=path, VOICE_SERVICE_TTS_ENGINES="piper")


@dataclass
class Started:
    process: subprocess.Popen[str]
    banner: list[str]  # stdout up to its line on making a console user
    port: int


def _start(cwd: Path) -> Started:
    """`.venv/bin/voice-service serve --port P` in `cwd`, its banner read up to the line
    on making a console user; the process is left running."""
    port = free_port()
    process = subprocess.Popen(  # noqa: S603
        [README_SCRIPT, "serve", "--port", str(port)],
        cwd=cwd,  # where the relative README_SCRIPT is found
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    lines: list[str] = []
    while not lines or " users create " not in lines[-1]:
        line = process.stdout.readline()
        assert line, f"serve exited ({process.wait()}) before its banner: {lines}"
        lines.append(line.rstrip("\n"))
    return Started(process, lines, port)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A directory laid out as the README's: the virtual environment in `.venv`."""
    (tmp_path / ".venv").symlink_to(SCRIPT.parent.parent, target_is_directory=True)
    return tmp_path


@pytest.fixture
def started(checkout: Path) -> Iterator[Started]:
    first = _start(checkout)
    yield first
    first.process.kill()
    first.process.wait()


def test_a_busy_port_is_refused_at_once_naming_it(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = voice_service("serve", "--port", str(port), cwd=tmp_path, env=_env())
    assert done.returncode != 0
    assert f"port {port} is in use" in done.stderr and "--port" in done.stderr
    # Before the app's lifespan, the first start's organization and the banner.
    assert LIFESPAN_STARTS not in done.stderr
    assert done.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_the_banner_comes_once_the_port_accepts_connections(started: Started) -> None:
    # Read the moment it is printed: the connection must not be refused, though the models
    # may still be loading (it waits in the listen backlog until they are).
    match = BANNER.match(started.banner[0])
    assert match is not None, started.banner
    assert int(match[1]) == started.port
    with socket.create_connection(("127.0.0.1", started.port), timeout=10):
        pass


def test_the_banner_names_the_data_dir_and_database_it_serves(
    started: Started, checkout: Path
) -> None:
    # A serve started in another folder starts an empty service: the banner says where.
    data = (checkout / "data").resolve()
    database = f"sqlite+aiosqlite:///{data / 'voice-service.db'}"
    assert started.banner[1] == f"Data dir {data}, database {database}"


def test_the_banner_prints_a_console_user_command_that_runs(
    started: Started, checkout: Path
) -> None:
    command = started.banner[-1].removeprefix("Sign in to the console: ")
    # The script's path as the reader started it (the virtual environment's bin is not on
    # PATH), not a bare voice-service.
    assert command.startswith(f"{README_SCRIPT} users create acct_"), command
    done = subprocess.run(  # noqa: S602 (a shell, as the reader pastes it into one)
        command, shell=True, cwd=checkout, env=_env(), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    account = command.split()[-2]
    assert done.stdout.startswith("Created user user_")
    assert f"(you@example.com) in {account}" in done.stdout


def test_a_second_serve_on_the_data_dir_refuses_until_the_first_is_gone(
    started: Started, checkout: Path
) -> None:
    second = voice_service("serve", "--port", str(free_port()), cwd=checkout, env=_env())
    assert second.returncode != 0 and second.stdout == ""
    assert f"another voice-service serve (pid {started.process.pid})" in second.stderr
    assert "--workers" in second.stderr and "VOICE_SERVICE_REDIS_URL" in second.stderr
    assert LIFESPAN_STARTS not in second.stderr
    started.process.kill()  # as a crash: no chance to let go of anything
    started.process.wait()
    third = _start(checkout)
    try:
        assert BANNER.match(third.banner[0]) is not None
        # A data dir with its first organization: the banner says so, without a key.
        assert "The first organization is org_" in third.banner[2]
    finally:
        third.process.kill()
        third.process.wait()


def test_a_speaker_model_that_is_not_one_stops_serve_with_one_line(tmp_path: Path) -> None:
    wrong = tmp_path / "speaker.onnx"
    wrong.write_bytes(b"not a model")
    env = {**_env(), "VOICE_SERVICE_SPEAKER_MODEL": str(wrong)}
    done = voice_service("serve", "--port", "0", cwd=tmp_path, env=env)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith(f"error: VOICE_SERVICE_SPEAKER_MODEL: {wrong}: not an ONNX model")
    assert len(done.stderr.strip().splitlines()) == 1
    assert LIFESPAN_STARTS not in done.stderr
    assert list(tmp_path.iterdir()) == [wrong]  # nothing made, no port taken


def _log_until(log: Path, line: str, process: subprocess.Popen[str]) -> list[str]:
    """The lines of `log` up to the first containing `line`, as `process` writes them."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        lines = log.read_text().splitlines()
        for n, written in enumerate(lines):
            if line in written:
                return lines[: n + 1]
        assert process.poll() is None, f"serve exited ({process.returncode}): {lines}"
        time.sleep(0.2)
    raise AssertionError(f"no {line!r} in {log.read_text()}")


def test_serve_says_what_it_loads_and_how_long_each_took_before_it_is_ready(
    tmp_path: Path,
) -> None:
    # The seconds of loading were silent: the engines this node runs, then those every
    # node has, one line as each starts and one when it is done, then uvicorn's ready line.
    log = tmp_path / "serve.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(  # noqa: S603
            [str(SCRIPT), "serve", "--port", "0"],
            cwd=tmp_path,
            env=_env(),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
        )
    try:
        lines = _log_until(log, READY, process)
    finally:
        process.kill()
        process.wait()
    loader = re.compile(r"voice_service\.inference\.(?:engines|transcribers): ")
    told = [
        re.sub(r" in \d+\.\d s$", " in N s", loader.split(line)[1])
        for line in lines
        if loader.search(line)
    ]
    loaded = [
        "piper (text to speech)",  # the only TTS engine _env() names
        "whisper base (speech to text)",
        "the speaker encoder",
        "the voice cloner",
        "the diarizer",
        "the voice activity detector",
    ]
    assert told == [
        line for what in loaded for line in (f"Loading {what}", f"Loaded {what} in N s")
    ]
    assert READY in lines[-1]
