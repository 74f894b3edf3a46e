"""How a live turn is decoded, seen from the engine's side: partials on from the deltas, in
short windows and without timestamp tokens; the final afresh, as a batch transcription."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from bench.speech_set import read_recording

from voice_service.audio.encode import FORMATS, OutputFormat, encode
from voice_service.engines.protocols import Pcm, TranscribeOptions
from voice_service.inference.engines import Engines
from voice_service.realtime.transcription import FIRST_PARTIAL, TranscriptionSession

CLIP = "librivox/sense_and_sensibility_01_austen_64kb-0870.wav"  # 7.1 s, one sentence
PIECE = 960 * 2  # 40 ms of 24 kHz 16-bit PCM, the session's default input
COMPLETED = "conversation.item.input_audio_transcription.completed"
DELTA = "conversation.item.input_audio_transcription.delta"

pytestmark = pytest.mark.anyio


def as_sent(audio: npt.NDArray[np.float32]) -> bytes:
    """16 kHz floats as the 24 kHz 16-bit PCM a client sends."""
    return encode(
        [Pcm(np.round(audio * 32767).astype(np.int16), 16_000)], FORMATS[OutputFormat.PCM]
    )


async def test_partials_decode_on_from_the_deltas_and_the_final_afresh(engines: Engines) -> None:
    whisper = engines.transcriber
    assert whisper is not None
    asked: list[TranscribeOptions] = []
    heard: list[int] = []  # samples each decode was given
    events: list[dict[str, Any]] = []

    async def transcribe(audio: npt.NDArray[np.float32], options: TranscribeOptions) -> str:
        asked.append(options)
        heard.append(audio.size)
        stream = await asyncio.to_thread(whisper.stream, audio, options)
        return await asyncio.to_thread(lambda: " ".join(s.text for s in stream.segments))

    completed = asyncio.Event()

    async def send(event: dict[str, Any]) -> None:
        events.append(event)
        if event["type"] == COMPLETED:
            completed.set()

    async def take(_seconds: object) -> None:
        pass

    session = TranscriptionSession(send, transcribe, lambda language: language, take, lambda: True)
    language = {"transcription": {"language": "en"}}
    update = {
        "type": "session.update",
        "session": {"type": "transcription", "audio": {"input": language}},
    }
    await session.handle(json.dumps(update))
    silence = np.zeros(16_000, dtype=np.float32)
    data = as_sent(np.concatenate([silence[:8_000], read_recording(CLIP), silence]))
    try:
        for start in range(0, len(data), PIECE):
            piece = base64.b64encode(data[start : start + PIECE]).decode()
            await session.handle(json.dumps({"type": "input_audio_buffer.append", "audio": piece}))
            # Each partial ends before the next piece: the same partials on every machine.
            while session.busy and not completed.is_set():  # noqa: ASYNC110 (a property)
                await asyncio.sleep(0.01)
        async with asyncio.timeout(120):
            await completed.wait()
    finally:
        await session.close()

    *partials, final = asked
    # The first partial as soon as half a second of the turn is spoken (a piece more at
    # most): the first words come sooner than after a second of it.
    assert FIRST_PARTIAL <= heard[0] <= FIRST_PARTIAL + PIECE // 3, heard[:3]
    said = [event["delta"] for event in events if event["type"] == DELTA]
    assert len(said) >= 2, said  # sent while the turn was spoken, and after
    assert all(not p.timestamp_tokens and p.window_seconds is not None for p in partials)
    # Each partial went on from what the deltas had said by then.
    prefixes = [p.prefix for p in partials if p.prefix is not None]
    assert prefixes and all("".join(said).startswith(prefix) for prefix in prefixes)
    # The final: Whisper's 30 s window, timestamp tokens, no prefix, as batch decodes.
    assert final == TranscribeOptions(language="en")
    transcript = next(event["transcript"] for event in events if event["type"] == COMPLETED)
    batch = whisper.stream(read_recording(CLIP), TranscribeOptions(language="en"))
    assert transcript == " ".join(segment.text for segment in batch.segments)
