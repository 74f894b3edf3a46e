"""A node with Wyoming listeners, driven by the `wyoming` package's own client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from tests.helpers.app import Tenant, Tenants, make_settings, running
from voice_service.app import create_app
from voice_service.inference.engines import Engines

IDLE_SECONDS = 3  # a client silent this long is cut off


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Node:
    app: FastAPI
    client: httpx.AsyncClient  # the HTTP API, for what Wyoming cannot do (cloning)
    tenants: Tenants
    tenant: Tenant  # the first listener's key
    other: Tenant  # the second listener's, another organization's
    ports: tuple[int, int]


@pytest.fixture(scope="module")
async def node(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, engines: Engines
) -> AsyncIterator[Node]:
    data_dir = tmp_path_factory.mktemp("wyoming")
    tenants = Tenants(make_settings(data_dir, database_url))
    tenant, other = await tenants.create(), await tenants.create()
    listeners = f"0={tenant.key_id},127.0.0.1:0={other.key_id}"
    settings = make_settings(
        data_dir,
        database_url,
        wyoming=listeners,
        realtime_idle_seconds=IDLE_SECONDS,
        wyoming_max_audio_seconds=30,
    )
    app = create_app(settings, engines)
    async with running(app) as client:
        first, second = (port for _, port in app.state.wyoming.addresses)
        yield Node(app, client, tenants, tenant, other, (first, second))
