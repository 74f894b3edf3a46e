"""Fixtures: a node with two Wyoming listeners, for two organizations."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.helpers.app import Tenants, make_settings
from tests.helpers.wyoming import Node, wyoming_node
from voice_service.inference.engines import Engines


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


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


@pytest.fixture
async def served(node: Node) -> AsyncIterator[None]:
    """A module's tests share its node: each ends once the node has served all it asked
    (`pytest.mark.usefixtures("served")` in a module whose tests count its rows)."""
    yield
    await node.served()
