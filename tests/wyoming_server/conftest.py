"""Nodes with Wyoming listeners, driven by the `wyoming` package's own client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from tests.helpers.app import Tenant, Tenants, make_settings, running
from voice_service.app import create_app
from voice_service.inference.engines import Engines

IDLE_SECONDS = 3  # a client silent this long is cut off
MAX_AUDIO_SECONDS = 30


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Node:
    app: FastAPI
    client: httpx.AsyncClient  # the HTTP API, for what Wyoming cannot do (cloning)
    tenants: Tenants
    keys: list[Tenant]  # each listener's key, in order
    ports: list[int]

    @property
    def tenant(self) -> Tenant:
        return self.keys[0]


@asynccontextmanager
async def wyoming_node(
    data_dir: Path, database_url: str, engines: Engines, keys: list[Tenant], **settings: object
) -> AsyncIterator[Node]:
    """A node with a listener on a free port for each of `keys`."""
    tenants = Tenants(make_settings(data_dir, database_url))
    listeners = ",".join(f"0={key.key_id}" for key in keys)
    app = create_app(
        make_settings(
            data_dir,
            database_url,
            wyoming=listeners,
            realtime_idle_seconds=IDLE_SECONDS,
            wyoming_max_audio_seconds=MAX_AUDIO_SECONDS,
            **settings,
        ),
        engines,
    )
    async with running(app) as client:
        ports = [port for _, port in app.state.wyoming.addresses]
        yield Node(app, client, tenants, keys, ports)


@pytest.fixture(scope="module")
async def node(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, engines: Engines
) -> AsyncIterator[Node]:
    """Two listeners, for two organizations."""
    data_dir = tmp_path_factory.mktemp("wyoming")
    tenants = Tenants(make_settings(data_dir, database_url))
    keys = [await tenants.create(), await tenants.create()]
    async with wyoming_node(data_dir, database_url, engines, keys) as started:
        yield started
