"""Talking to a listener with the `wyoming` package's `AsyncTcpClient`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.event import Event, Eventable

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
