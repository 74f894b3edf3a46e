"""Home Assistant's own Wyoming servers (wyoming-piper, wyoming-faster-whisper) started for
the bench, and one Wyoming request timed from the client's side, the same way for them and
for our listener."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.tts import Synthesize, SynthesizeVoice

from bench import procs
from bench.procs import Server, free_port

PATIENCE = 300.0
CHUNK_SECONDS = 0.02  # a microphone's 20 ms


@dataclass(frozen=True, slots=True)
class Spoken:
    first_s: float  # to the first audio chunk
    whole_s: float  # to the end of the audio
    audio_bytes: int


@dataclass(frozen=True, slots=True)
class Heard:
    text: str
    after_stop_s: float  # from audio-stop sent to the transcript


async def speak(port: int, text: str, voice: str | None = None) -> Spoken:
    started = time.perf_counter()
    first = 0.0
    audio = 0
    chosen = SynthesizeVoice(name=voice) if voice else None
    async with asyncio.timeout(PATIENCE), AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text=text, voice=chosen).event())
        while (event := await client.read_event()) is not None:
            if AudioChunk.is_type(event.type):
                audio += len(AudioChunk.from_event(event).audio)
                first = first or time.perf_counter() - started
            elif AudioStop.is_type(event.type):
                return Spoken(first, time.perf_counter() - started, audio)
            elif Error.is_type(event.type):
                raise RuntimeError(f"the server refused: {event.data}")
    raise ConnectionError("the server closed the connection before the audio ended")


async def speak_at_once(port: int, texts: list[str], voice: str | None = None) -> float:
    """Seconds until every one of `texts`, sent at once on connections of their own, is
    spoken."""
    started = time.perf_counter()
    await asyncio.gather(*(speak(port, text, voice) for text in texts))
    return time.perf_counter() - started


async def transcribe(port: int, pcm: bytes, rate: int, language: str) -> Heard:
    """16-bit mono `pcm` sent as fast as the connection takes it, in 20 ms chunks."""
    step = round(rate * CHUNK_SECONDS) * 2
    async with asyncio.timeout(PATIENCE), AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Transcribe(language=language).event())
        await client.write_event(AudioStart(rate=rate, width=2, channels=1).event())
        for offset in range(0, len(pcm), step):
            chunk = AudioChunk(rate=rate, width=2, channels=1, audio=pcm[offset : offset + step])
            await client.write_event(chunk.event())
        await client.write_event(AudioStop().event())
        stopped = time.perf_counter()
        while (event := await client.read_event()) is not None:
            if Transcript.is_type(event.type):
                text = Transcript.from_event(event).text
                return Heard(text, time.perf_counter() - stopped)
            if Error.is_type(event.type):
                raise RuntimeError(f"the server refused: {event.data}")
    raise ConnectionError("the server closed the connection before the transcript")


def start_peer(
    name: str, command: list[str], work: Path, ready: Callable[[int], Coroutine[Any, Any, object]]
) -> Server:
    """`command --uri tcp://127.0.0.1:PORT` on a free port, once `ready(PORT)` succeeds."""
    port = free_port()
    uri = f"tcp://127.0.0.1:{port}"
    return procs.start_peer(
        name, [*command, "--uri", uri], uri, work, lambda: asyncio.run(ready(port))
    )


def port_of(server: Server) -> int:
    return int(server.root.rsplit(":", 1)[1])
