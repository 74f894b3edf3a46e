"""A Wyoming listener under load and at a stop: a busy node answers with an `error` event
at once, connections past the node's cap are told so, open connections show in /metrics,
and a stopping node lets the request under way finish, then closes."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import numpy as np
import pytest
from bench.speech_set import real_clips
from wyoming.asr import Transcribe
from wyoming.info import Describe
from wyoming.tts import Synthesize

from tests.helpers.app import Tenants, fresh_database, make_settings
from tests.helpers.waiting import eventually
from tests.helpers.wyoming import (
    Node,
    audio_events,
    books_of,
    connected,
    new_rows,
    pcm16,
    read_until,
    send,
    wyoming_node,
)
from voice_service.inference.engines import Engines

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("served")]

MAX_CONNECTIONS = 3


@asynccontextmanager
async def _node(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, engines: Engines
) -> AsyncIterator[Node]:
    data_dir = tmp_path_factory.mktemp("wyoming-operations")
    tenants = Tenants(make_settings(data_dir, database_url))
    keys = [await tenants.create()]
    async with wyoming_node(
        data_dir,
        database_url,
        engines,
        keys,
        pool_size=1,
        max_queued_per_capability=0,
        max_connections=MAX_CONNECTIONS,
    ) as started:
        yield started


@pytest.fixture(scope="module")
def own_database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A database of this module's own: its nodes have one worker and no queue, and no
    other test's queued job may take that worker (a job's piece is a transcription)."""
    with fresh_database(tmp_path_factory.mktemp("wyoming-operations-db")) as url:
        yield url


@pytest.fixture(scope="module")
async def node(
    tmp_path_factory: pytest.TempPathFactory, own_database_url: str, engines: Engines
) -> AsyncIterator[Node]:
    async with _node(tmp_path_factory, own_database_url, engines) as started:
        yield started


def _transcribing(node: Node) -> bool:
    return bool(node.app.state.context.pool.queues()["speech-to-text"]["running"])


async def test_a_busy_node_refuses_at_once(node: Node) -> None:
    """The pool's one worker decodes a transcription (the pool's own count says so) when
    the synthesis asks: it is refused then, not queued behind it."""
    clip = real_clips()[0]
    async with connected(node.ports[0]) as first, connected(node.ports[0]) as second:
        await send(first, Transcribe(language="en"), *audio_events(pcm16(clip.audio), 16_000))
        await asyncio.to_thread(eventually, lambda: _transcribing(node))
        await send(second, Synthesize("Is anyone there?"))
        refused = await read_until(second, "audio-stop")
        assert _transcribing(node)  # still: the refusal did not wait for it
        answered = await read_until(first, "transcript")
    assert refused.error is not None and "busy" in refused.error["text"], refused.events
    assert answered.error is None and answered.of("transcript"), (
        answered.events,
        node.app.state.context.pool.queues(),
    )


async def test_connections_past_the_cap_are_told_so(node: Node) -> None:
    # Other tests' connections are closed, once the node has seen them close.
    assert await asyncio.to_thread(eventually, lambda: node.app.state.wyoming.open == 0)
    async with (
        connected(node.ports[0]) as a,
        connected(node.ports[0]) as b,
        connected(node.ports[0]) as c,
    ):
        for client in (a, b, c):  # each is served: the handlers count them
            await send(client, Describe())
            assert (await read_until(client, "info")).error is None
        async with connected(node.ports[0]) as d:
            answer = await read_until(d, "info")
        assert answer.error is not None and "3 connections" in answer.error["text"]
        metrics = (await node.client.get("http://testserver/metrics")).text
        (value,) = re.findall(r"^voice_service_wyoming_connections (\S+)$", metrics, re.M)
        assert float(value) == MAX_CONNECTIONS
    counted = re.findall(
        r'^voice_service_requests_total\{endpoint="/wyoming/describe",status="200"\} (\S+)$',
        metrics,
        re.M,
    )
    assert counted and float(counted[0]) >= MAX_CONNECTIONS


async def test_a_stopping_node_finishes_the_request_under_way(
    tmp_path_factory: pytest.TempPathFactory, own_database_url: str, engines: Engines
) -> None:
    pcm = pcm16(real_clips()[1].audio)
    head, tail = list(audio_events(pcm, 16_000)), []
    tail = head[len(head) // 2 :]
    head = head[: len(head) // 2]
    async with _node(tmp_path_factory, own_database_url, engines) as node:
        key = node.tenant.key_id
        before = await books_of(node.tenants, key)
        async with connected(node.ports[0]) as client, connected(node.ports[0]) as idle:
            await send(client, Transcribe(language="en"), *head)
            wyoming = node.app.state.wyoming
            assert await asyncio.to_thread(eventually, lambda: wyoming.under_way == 1)
            stopping = asyncio.create_task(node.app.state.wyoming.stop(60))
            await asyncio.sleep(0)  # it stops taking connections before its first wait
            with pytest.raises(ConnectionRefusedError):
                async with connected(node.ports[0]):
                    pass
            assert await idle.read_event() is None  # no request under way: closed
            await send(client, *tail)
            answer = await read_until(client, "transcript-stop")
            assert answer.error is None and answer.of("transcript")
            await asyncio.wait_for(stopping, 30)
            assert await client.read_event() is None  # then this one closes too
        books = await new_rows(node.tenants, key, before)
        assert [row.status for row in books.logged] == [200]
        assert [usage.units for usage in books.billed] == [int(np.ceil(len(pcm) / 2 / 16_000))]
