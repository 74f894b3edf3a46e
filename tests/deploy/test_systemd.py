"""The systemd unit docs/operations.md ships (deploy/systemd/voice-service.service), read by
systemd's own tools, no running systemd needed: it loads without a warning, its sandbox is
rated "OK", and what it tells the service is what the service reads."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from voice_service.cli import app as cli
from voice_service.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "systemd" / "voice-service.service"
INSTALLED = "/opt/voice-service/bin/voice-service"  # where the guide installs it


def _lines(key: str) -> list[str]:
    return re.findall(rf"^{key}=(.*)$", UNIT.read_text(), re.MULTILINE)


@pytest.fixture
def unit_here(tmp_path: Path) -> Path:
    """The unit with this environment's `voice-service` in place of the installed one:
    systemd checks that its command exists."""
    here = Path(sys.prefix) / "bin" / "voice-service"
    assert here.is_file()
    copy = tmp_path / UNIT.name
    copy.write_text(UNIT.read_text().replace(INSTALLED, str(here)))
    return copy


def _analyze(*args: str) -> subprocess.CompletedProcess[str]:
    analyze = shutil.which("systemd-analyze")  # Debian's systemd package; .ci/run installs it
    assert analyze is not None, "systemd-analyze is not installed"
    return subprocess.run(  # noqa: S603
        [analyze, *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_the_unit_loads_without_a_warning(unit_here: Path) -> None:
    verified = _analyze("verify", str(unit_here))
    assert verified.returncode == 0, verified.stderr
    assert verified.stderr == "" and verified.stdout == ""


def test_its_sandbox_is_rated_ok(unit_here: Path) -> None:
    rated = _analyze("security", "--offline=true", "--no-pager", str(unit_here))
    assert rated.returncode == 0, rated.stderr
    overall = re.search(r"Overall exposure level for \S+: ([\d.]+) (\w+)", rated.stdout)
    assert overall is not None, rated.stdout[-500:]
    assert overall.group(2) == "OK", overall.group(0)


def test_it_tells_the_service_what_the_service_reads() -> None:
    (command,) = _lines("ExecStart")
    program, subcommand, *options = shlex.split(command)
    assert program == INSTALLED and subcommand == "serve"
    serve_help = CliRunner().invoke(cli, ["serve", "--help"]).output
    assert all(option in serve_help for option in options if option.startswith("--"))
    prefix = "VOICE_SERVICE_"
    for line in _lines("Environment"):
        for name in re.findall(rf"\b{prefix}(\w+)=", line):
            assert name.lower() in Settings.model_fields, name
    # A drain (`VOICE_SERVICE_DRAIN_TIMEOUT_SECONDS`) ends before systemd kills the node.
    (stop,) = _lines("TimeoutStopSec")
    default_drain = Settings.model_fields["drain_timeout_seconds"].default
    assert int(stop) > default_drain
    assert _lines("KillSignal") == ["SIGTERM"] and _lines("Restart") == ["on-failure"]
