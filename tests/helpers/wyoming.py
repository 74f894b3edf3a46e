"""Nodes with Wyoming listeners, talked to with the `wyoming` package's `AsyncTcpClient`,
and the books their requests leave."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import numpy.typing as npt
from fastapi import FastAPI
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.event import Event, Eventable, async_write_event

from tests.helpers.app import Tenant, Tenants, make_settings, running
from voice_service.app import create_app
from voice_service.core.models import RequestLogEntry, UsageRecord
from voice_service.inference.engines import Engines
from voice_service.wyoming.listeners import WyomingListeners

IDLE_SECONDS = 3  # a client silent this long is cut off
MAX_AUDIO_SECONDS = 30


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

    async def served(self) -> None:
        """Once the node has closed every connection (a request's rows are written before
        its connection's end): what a test asked is then in the books, not left to land in
        the next test's."""
        listeners: WyomingListeners = self.app.state.wyoming
        for _ in range(600):
            if listeners.open == 0:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"{listeners.open} Wyoming connections never closed")


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


# --- the client --------------------------------------------------------------------------

READ_TIMEOUT = 120.0


@dataclass
class Answer:
    events: list[Event] = field(default_factory=list)

    def of(self, kind: str) -> list[Event]:
        return [event for event in self.events if event.type == kind]

    @property
    def audio(self) -> bytes:
        return b"".join(event.payload or b"" for event in self.of("audio-chunk"))

    @property
    def rate(self) -> int:
        (start,) = self.of("audio-start")
        rate: int = start.data["rate"]
        return rate

    @property
    def error(self) -> dict[str, str] | None:
        errors = self.of("error")
        return errors[0].data if errors else None


@asynccontextmanager
async def connected(port: int) -> AsyncIterator[AsyncTcpClient]:
    async with AsyncTcpClient("127.0.0.1", port, read_timeout=READ_TIMEOUT) as client:
        yield client


async def send(client: AsyncTcpClient, *messages: Eventable | Event) -> None:
    for message in messages:
        await client.write_event(message if isinstance(message, Event) else message.event())


async def read_until(client: AsyncTcpClient, *last: str) -> Answer:
    """Events up to one of type `last` (or an error, or the connection's end)."""
    answer = Answer()
    while True:
        event = await client.read_event()
        if event is None:
            return answer
        answer.events.append(event)
        if event.type in last or event.type == "error":
            return answer


class _Measure:
    """A stream writer's calls, counting the bytes an event takes on the wire."""

    def __init__(self) -> None:
        self.written = 0

    def writelines(self, data: Iterable[bytes]) -> None:
        self.written += sum(len(piece) for piece in data)

    def write(self, data: bytes) -> None:
        self.written += len(data)

    async def drain(self) -> None:
        pass


async def wire_bytes(events: Iterable[Event]) -> int:
    """What `events` take on the wire: each one's line, data and payload, as the `wyoming`
    package writes them."""
    measure = _Measure()
    for event in events:
        await async_write_event(event, measure)  # type: ignore[arg-type]
    return measure.written


def pcm16(samples: npt.NDArray[np.float32]) -> bytes:
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


def audio_events(
    pcm: bytes, rate: int, width: int = 2, channels: int = 1, chunk_seconds: float = 0.02
) -> Iterable[Eventable]:
    """`pcm` as a microphone sends it: audio-start, a chunk per 20 ms, audio-stop."""
    step = round(rate * chunk_seconds) * width * channels
    yield AudioStart(rate=rate, width=width, channels=channels)
    for offset in range(0, len(pcm), step):
        yield AudioChunk(
            rate=rate, width=width, channels=channels, audio=pcm[offset : offset + step]
        )
    yield AudioStop()


async def no_event_within(client: AsyncTcpClient, seconds: float) -> bool:
    try:
        async with asyncio.timeout(seconds):
            await client.read_event()
    except TimeoutError:
        return True
    return False


# --- the books ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Books:
    logged: list[RequestLogEntry]
    billed: list[UsageRecord]

    def of(self, request_id: str) -> list[UsageRecord]:
        return [row for row in self.billed if row.request_id == request_id]


async def books_of(tenants: Tenants, key_id: str) -> Books:
    async def read(session: AsyncSession) -> Books:
        logged = await session.scalars(
            select(RequestLogEntry)
            .where(RequestLogEntry.key_id == key_id)
            .order_by(RequestLogEntry.created_at)
        )
        billed = await session.scalars(select(UsageRecord).where(UsageRecord.key_id == key_id))
        return Books(list(logged), list(billed))

    return await tenants.run(read)


async def new_rows(tenants: Tenants, key_id: str, before: Books, count: int = 1) -> Books:
    """The rows the key gained since `before`, once `count` log rows have arrived (the
    request log is written in batches, a moment after the answer)."""
    seen = {row.request_id for row in before.logged}
    for _ in range(600):
        now = await books_of(tenants, key_id)
        logged = [row for row in now.logged if row.request_id not in seen]
        if len(logged) >= count:
            billed = [row for row in now.billed if row.request_id in {r.request_id for r in logged}]
            return Books(logged, billed)
        await asyncio.sleep(0.1)
    raise AssertionError(f"{count} new request-log rows never arrived")
