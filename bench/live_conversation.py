"""Figure 16 side by side: the same real recordings, one after another in one live session
(each followed by `PAUSE` seconds of silence, as a speaker waits for an answer), streamed at
real-time pace in 40 ms pieces to our node and to WhisperLive (bench/whisper_live.py). Per
utterance: seconds from its speech start to the first words about it, from its speech end to
its final text, and that text. A server that never makes an utterance's text final within
the session (and `GRACE` seconds after it) scores inf for it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import websockets

from bench.realtime import LEAD, PIECE
from bench.recordings import read_recording
from voice_service.audio.encode import FORMATS, OutputFormat, encode
from voice_service.engines.protocols import Pcm

RATE = 16_000
PAUSE = 1.5  # seconds of silence after each utterance
GRACE = 4.0  # seconds after the last piece the servers are heard for
PATIENCE = 120.0


@dataclass
class Utterance:
    start_s: float  # where its speech lies in the stream
    end_s: float
    sent_start: float = 0.0  # perf_counter when its first and last samples were sent
    sent_end: float = 0.0
    first_words: float = float("inf")  # perf_counter of the first words about it
    final: float = float("inf")  # of its final text
    text: str = ""

    def result(self) -> dict[str, Any]:
        return {
            "first_words_after_start_s": self.first_words - self.sent_start,
            "final_after_speech_s": self.final - self.sent_end,
            "text": self.text,
        }


@dataclass
class Conversation:
    audio: np.ndarray[Any, Any]  # 16 kHz float32
    utterances: list[Utterance] = field(default_factory=list)


def conversation(recordings: tuple[str, ...]) -> Conversation:
    parts = [np.zeros(round(LEAD * RATE), np.float32)]
    utterances = []
    at = LEAD
    for recording in recordings:
        speech = read_recording(recording)
        utterances.append(Utterance(at, at + speech.size / RATE))
        parts += [speech, np.zeros(round(PAUSE * RATE), np.float32)]
        at += speech.size / RATE + PAUSE
    return Conversation(np.concatenate(parts), utterances)


async def _stream(
    talk: Conversation, send: Callable[[np.ndarray[Any, Any]], Awaitable[None]]
) -> None:
    """The audio at real-time pace, noting when each utterance's first and last samples go."""
    step = round(RATE * PIECE)
    started = time.perf_counter()
    for index, start in enumerate(range(0, talk.audio.size, step)):
        for utterance in talk.utterances:
            if start <= round(utterance.start_s * RATE) < start + step:
                utterance.sent_start = time.perf_counter()
            if start < round(utterance.end_s * RATE) <= start + step:
                utterance.sent_end = time.perf_counter()
        await send(talk.audio[start : start + step])
        await asyncio.sleep(max(0.0, started + (index + 1) * PIECE - time.perf_counter()))


async def ours(url: str, key: str, recordings: tuple[str, ...]) -> list[dict[str, Any]]:
    """Our node's OpenAI Realtime transcription session: its turns, in order, are the
    utterances (the VAD ends a turn after 0.5 s of silence)."""
    talk = conversation(recordings)
    headers = {"Authorization": f"Bearer {key}"}
    async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
        session = {
            "type": "transcription",
            "audio": {"input": {"transcription": {"language": "en"}}},
        }
        await ws.send(json.dumps({"type": "session.update", "session": session}))
        items: list[str] = []  # turns' item ids, in the order their speech started

        async def listen() -> None:
            completed = 0
            async for raw in ws:
                event = json.loads(raw)
                kind, item = event["type"], event.get("item_id")
                if kind == "input_audio_buffer.speech_started" and item not in items:
                    items.append(item)
                turn = items.index(item) if item in items else None
                if turn is None or turn >= len(talk.utterances):
                    continue
                utterance = talk.utterances[turn]
                if kind.endswith("transcription.delta"):
                    utterance.first_words = min(utterance.first_words, time.perf_counter())
                elif kind.endswith("transcription.completed"):
                    utterance.final, utterance.text = time.perf_counter(), event["transcript"]
                    utterance.first_words = min(utterance.first_words, utterance.final)
                    completed += 1
                    if completed == len(talk.utterances):
                        return

        async def send(piece: np.ndarray[Any, Any]) -> None:
            pcm = encode(
                [Pcm(np.round(piece * 32767).astype(np.int16), RATE)], FORMATS[OutputFormat.PCM]
            )
            await ws.send(
                json.dumps(
                    {"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()}
                )
            )

        listener = asyncio.create_task(listen())
        await _stream(talk, send)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(listener, GRACE)
    return [utterance.result() for utterance in talk.utterances]


async def whisper_live(
    url: str, options: dict[str, Any], recordings: tuple[str, ...]
) -> list[dict[str, Any]]:
    """A WhisperLive session: its segments (times in the stream) are each utterance's whose
    span holds the segment's middle; an utterance is final once every segment about it is
    `completed`."""
    talk = conversation(recordings)
    async with websockets.connect(url, max_size=None) as ws:
        await ws.send(json.dumps(options))
        json.loads(await ws.recv())  # SERVER_READY

        async def listen() -> None:
            async for raw in ws:
                segments = json.loads(raw).get("segments") or []
                now = time.perf_counter()
                for utterance in talk.utterances:
                    about = [s for s in segments if _about(s, utterance)]
                    text = " ".join(s["text"].strip() for s in about).strip()
                    if not text:
                        continue
                    utterance.first_words = min(utterance.first_words, now)
                    utterance.text = text
                    if all(s.get("completed") for s in about):
                        utterance.final = min(utterance.final, now)

        listener = asyncio.create_task(listen())

        async def send(piece: np.ndarray[Any, Any]) -> None:
            await ws.send(piece.astype(np.float32).tobytes())

        await _stream(talk, send)
        await asyncio.sleep(GRACE)
        listener.cancel()
    return [utterance.result() for utterance in talk.utterances]


def _about(segment: dict[str, Any], utterance: Utterance) -> bool:
    middle = (float(segment["start"]) + float(segment["end"])) / 2
    return utterance.start_s - PAUSE / 2 <= middle <= utterance.end_s + PAUSE / 2
