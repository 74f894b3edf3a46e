"""The house as docs/architecture.md draws it is the house in src/ and pyproject.toml: every
top-level package is on the map, the layers are pyproject's, and the servers' surfaces never
open a database session (import-linter cannot see a call on `context.sessions`)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "voice_service"
MAP = (ROOT / "docs" / "architecture.md").read_text()
SERVER_SURFACES = ("api", "openai_api", "console", "realtime", "wyoming", "web")


def _layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    (layered,) = (c for c in contracts if c["type"] == "layers")
    layers: list[str] = layered["layers"]
    return layers


def _drawn_layers() -> list[str]:
    """The first column of the map's first code block."""
    block = MAP.split("```")[1]
    drawn = []
    for line in block.strip("\n").splitlines():
        name = re.split(r"\s{2,}", line.strip())[0]
        if name and not line.startswith(" "):
            drawn.append(name)
    return drawn


def test_the_map_draws_pyprojects_layers() -> None:
    assert _drawn_layers() == _layers()


def _rooms() -> list[str]:
    return sorted(
        f"{path.name}/" if path.is_dir() else path.name
        for path in PACKAGE.iterdir()
        if (path.is_dir() and (path / "__init__.py").is_file())
        or (path.suffix == ".py" and path.name != "__init__.py")
    )


@pytest.mark.parametrize("room", _rooms())
def test_every_room_is_on_the_map(room: str) -> None:
    assert re.search(rf"^  {re.escape(room)}\s", MAP, re.MULTILINE), (
        f"{room} is not in docs/architecture.md's rooms"
    )


def _modules(surface: str) -> list[Path]:
    return sorted((PACKAGE / surface).rglob("*.py"))


@pytest.mark.parametrize("surface", SERVER_SURFACES)
def test_servers_surfaces_open_no_session(surface: str) -> None:
    opened = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in _modules(surface)
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bsessions\(\)|\btransaction\(", line)
    ]
    assert not opened, "a surface opens a session; call a service instead:\n" + "\n".join(opened)


# The suites that are not one package's, and why (docs/architecture.md says the same).
APART = {
    "helpers": "what the tests share",
    "cluster": "nodes of a cluster, killed and cut off, across every package",
    "live": "a real server in the test process, driven by SDKs and read as streams",
    "bench": "the benchmark harness beside src/, not a package of it",
    "deploy": "the files an operator deploys with (deploy/), beside src/",
}
ROOT_MODULES = {"test_architecture.py", "test_readme_examples.py"}  # the house and its docs


def test_the_tests_mirror_the_packages() -> None:
    packages = {room.rstrip("/") for room in _rooms() if room.endswith("/")}
    suites = {path.name for path in (ROOT / "tests").iterdir() if path.is_dir()}
    suites.discard("__pycache__")
    assert suites - packages - set(APART) == set()
    loose = {path.name for path in (ROOT / "tests").glob("test_*.py")}
    assert loose == ROOT_MODULES, "a package's tests go in tests/<package>/"
