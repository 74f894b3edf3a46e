"""Connections one listener's clients cannot take from another's: Wyoming asks no
credential, so anyone who reaches a listener can open connections on it. Each listener has
its own cap, keeps a reserve of the node's connections, and a connection that makes no
request for the idle timeout is closed however often it pings."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest
from wyoming.client import AsyncTcpClient
from wyoming.event import Event, async_read_event, async_write_event
from wyoming.info import Describe
from wyoming.ping import Ping

from tests.helpers.app import Tenants, make_settings
from tests.helpers.waiting import eventually
from tests.helpers.wyoming import IDLE_SECONDS, Node, read_until, send, wyoming_node
from voice_service.inference.engines import Engines
from voice_service.wyoming.listeners import WyomingListeners

pytestmark = pytest.mark.anyio

A, B = 0, 1
CAPACITY = 8  # the node's connections; a reserve of 8 // (2 * 2) = 2 for each listener


@asynccontextmanager
async def two_listeners(
    tmp_path: Path, database_url: str, engines: Engines, per_listener: int
) -> AsyncIterator[Node]:
    tenants = Tenants(make_settings(tmp_path, database_url))
    keys = [await tenants.create(), await tenants.create()]
    async with wyoming_node(
        tmp_path,
        database_url,
        engines,
        keys,
        max_connections=CAPACITY,
        wyoming_max_connections=per_listener,
    ) as node:
        yield node


async def served(port: int, stack: AsyncExitStack) -> AsyncTcpClient | str:
    """A connection whose `describe` is answered (it is being served), else the text of
    the error that refused it."""
    client = AsyncTcpClient("127.0.0.1", port)
    await client.connect()
    stack.push_async_callback(_disconnect, client)
    with contextlib.suppress(ConnectionError):  # a refused one may be closed already
        await send(client, Describe())
    answer = await read_until(client, "info")
    return client if answer.error is None else answer.error["text"]


async def _disconnect(client: AsyncTcpClient) -> None:
    with contextlib.suppress(ConnectionError):  # the node closed a refused one first
        await client.disconnect()


async def _answer_other_than_pong(reader: asyncio.StreamReader, within: float) -> Event | None:
    """What the node sends in the next `within` seconds besides its pong (it is read while
    it comes, so the client never writes to a connection the node has closed)."""
    try:
        async with asyncio.timeout(within):
            while (event := await async_read_event(reader)) is not None:
                if event.type != "pong":
                    return event
    except TimeoutError:
        return None
    return Event("closed")


def listeners(node: Node) -> WyomingListeners:
    found: WyomingListeners = node.app.state.wyoming
    return found


async def test_one_listener_cannot_take_the_connections_kept_for_another(
    tmp_path: Path, database_url: str, engines: Engines
) -> None:
    async with (
        two_listeners(tmp_path, database_url, engines, per_listener=CAPACITY) as node,
        AsyncExitStack() as stack,
    ):
        taken = [await served(node.ports[A], stack) for _ in range(CAPACITY - 2)]
        assert all(isinstance(client, AsyncTcpClient) for client in taken)
        refused = await served(node.ports[A], stack)  # the rest are kept for B
        assert isinstance(refused, str) and "kept for its other listeners" in refused
        assert [listener.open for listener in listeners(node).listeners] == [CAPACITY - 2, 0]
        for _ in range(2):
            assert isinstance(await served(node.ports[B], stack), AsyncTcpClient)
        over = await served(node.ports[B], stack)
        assert isinstance(over, str) and f"{CAPACITY} connections" in over


async def test_a_listener_holds_at_most_its_own_cap(
    tmp_path: Path, database_url: str, engines: Engines
) -> None:
    async with (
        two_listeners(tmp_path, database_url, engines, per_listener=3) as node,
        AsyncExitStack() as stack,
    ):
        for _ in range(3):
            assert isinstance(await served(node.ports[A], stack), AsyncTcpClient)
        refused = await served(node.ports[A], stack)
        assert isinstance(refused, str) and "WYOMING_MAX_CONNECTIONS" in refused
        assert isinstance(await served(node.ports[B], stack), AsyncTcpClient)


async def test_a_connection_that_only_pings_is_closed_after_the_idle_timeout(
    tmp_path: Path, database_url: str, engines: Engines
) -> None:
    async with (
        two_listeners(tmp_path, database_url, engines, per_listener=CAPACITY) as node,
        AsyncExitStack() as stack,
    ):
        reader, writer = await asyncio.open_connection("127.0.0.1", node.ports[A])
        stack.callback(writer.close)
        closed_by = None
        for _ in range(IDLE_SECONDS * 10):  # a ping each 0.5 s, well within the timeout
            await async_write_event(Ping().event(), writer)
            closed_by = await _answer_other_than_pong(reader, within=0.5)
            if closed_by is not None:
                break
        assert closed_by is not None and closed_by.type == "error", "still open"
        assert "No request" in closed_by.data["text"]
        assert await asyncio.to_thread(eventually, lambda: listeners(node).listeners[A].open == 0)
