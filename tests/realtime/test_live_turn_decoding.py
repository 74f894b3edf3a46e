"""How a live turn is decoded, seen from the engine's side: partials on from the deltas, in
short windows and without timestamp tokens; the final afresh, as a batch transcription."""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from bench.recordings import read_recording

from voice_service.audio.encode import FORMATS, OutputFormat, encode
from voice_service.engines.protocols import Pcm, TranscribeOptions
from voice_service.inference.engines import Engines
from voice_service.realtime.transcription import FINAL_TAIL, FIRST_PARTIAL, TranscriptionSession

CLIP = "librivox/sense_and_sensibility_01_austen_64kb-0870.wav"  # 7.1 s, one sentence
PIECE = 960 * 2  # 40 ms of 24 kHz 16-bit PCM, the session's default input
COMPLETED = "conversation.item.input_audio_transcription.completed"
COMMITTED = "input_audio_buffer.committed"
SPEECH = read_recording(CLIP)
SILENCE = np.zeros(16_000, dtype=np.float32)
DELTA = "conversation.item.input_audio_transcription.delta"

pytestmark = pytest.mark.anyio


def as_sent(audio: npt.NDArray[np.float32]) -> bytes:
    """16 kHz floats as the 24 kHz 16-bit PCM a client sends."""
    return encode(
        [Pcm(np.round(audio * 32767).astype(np.int16), 16_000)], FORMATS[OutputFormat.PCM]
    )


@dataclass
class Decode:
    options: TranscribeOptions
    audio: npt.NDArray[np.float32]
    committed: bool  # asked after the turn's commit was announced


@dataclass
class Heard:
    decodes: list[Decode]
    events: list[dict[str, Any]]

    @property
    def finals(self) -> list[Decode]:
        return [decode for decode in self.decodes if decode.options.window_seconds is None]


async def heard_live(
    engines: Engines,
    audio: npt.NDArray[np.float32],
    detection: dict[str, Any] | None = None,
    *,
    then: tuple[dict[str, Any], npt.NDArray[np.float32]] | None = None,
    then_finish: bool = False,
) -> Heard:
    """`audio` (16 kHz) streamed into a session in 40 ms pieces (and `then` a client event
    and more audio), until one turn of it is completed (or until it is all sent, then the
    session `finish`ed, as when its node stops); each piece sent once the session has
    nothing running, so that what it decodes is the same on every machine."""
    whisper = engines.transcribers.model(None)
    assert whisper is not None
    heard = Heard([], [])

    async def transcribe(audio: npt.NDArray[np.float32], options: TranscribeOptions) -> str:
        committed = any(event["type"] == COMMITTED for event in heard.events)
        heard.decodes.append(Decode(options, audio, committed))
        stream = await asyncio.to_thread(whisper.stream, audio, options)
        return await asyncio.to_thread(lambda: " ".join(s.text for s in stream.segments))

    completed = asyncio.Event()

    async def send(event: dict[str, Any]) -> None:
        heard.events.append(event)
        if event["type"] == COMPLETED:
            completed.set()

    async def take(_seconds: object) -> None:
        pass

    session = TranscriptionSession(
        send, transcribe, lambda language: language, take, lambda: True, parse_model=lambda _: None
    )
    settings: dict[str, Any] = {"transcription": {"language": "en"}}
    if detection is not None:
        settings["turn_detection"] = {"type": "server_vad", **detection}
    update = {
        "type": "session.update",
        "session": {"type": "transcription", "audio": {"input": settings}},
    }
    await session.handle(json.dumps(update))

    async def stream(samples: npt.NDArray[np.float32]) -> None:
        data = as_sent(samples)
        for start in range(0, len(data), PIECE):
            piece = base64.b64encode(data[start : start + PIECE]).decode()
            await session.handle(json.dumps({"type": "input_audio_buffer.append", "audio": piece}))
            # Each partial ends before the next piece: the same partials on every machine.
            while session.busy and not completed.is_set():  # noqa: ASYNC110 (a property)
                await asyncio.sleep(0.01)

    try:
        await stream(audio)
        if then is not None:
            event, more = then
            await session.handle(json.dumps(event))
            await stream(more)
        if then_finish:
            await session.finish()
        async with asyncio.timeout(120):
            await completed.wait()
    finally:
        await session.close()
    return heard


def batch(engines: Engines, audio: npt.NDArray[np.float32]) -> str:
    assert engines.transcribers is not None
    stream = engines.transcribers.model(None).stream(audio, TranscribeOptions(language="en"))
    return " ".join(segment.text for segment in stream.segments)


async def test_partials_decode_on_from_the_deltas_and_the_final_afresh(engines: Engines) -> None:
    session = await heard_live(engines, np.concatenate([SILENCE[:8_000], SPEECH, SILENCE]))
    events = session.events
    asked = [decode.options for decode in session.decodes]
    heard = [decode.audio.size for decode in session.decodes]
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
    assert transcript == batch(engines, SPEECH)


async def test_the_final_is_decoded_once_the_speaker_has_been_silent_a_moment(
    engines: Engines,
) -> None:
    session = await heard_live(engines, np.concatenate([SILENCE[:8_000], SPEECH, SILENCE]))
    # One final, asked before the commit (which waits for 500 ms of silence), on the turn
    # up to FINAL_TAIL into that silence: what the transcript says is its batch transcript.
    [final] = session.finals
    assert not final.committed
    committed = next(event for event in session.events if event["type"] == COMMITTED)
    stopped = next(e for e in session.events if e["type"] == "input_audio_buffer.speech_stopped")
    started = next(e for e in session.events if e["type"] == "input_audio_buffer.speech_started")
    turn_ms = stopped["audio_end_ms"] - started["audio_start_ms"]
    assert final.audio.size < turn_ms * 16 - 2 * FINAL_TAIL // 3, (final.audio.size, turn_ms)
    completed = next(event for event in session.events if event["type"] == COMPLETED)
    assert completed["item_id"] == committed["item_id"]
    assert completed["transcript"] == batch(engines, final.audio)
    # Billed for the whole turn committed, not only what the final heard.
    assert completed["usage"]["seconds"] == pytest.approx(turn_ms / 1000, abs=0.002)


async def test_a_final_decoded_ahead_is_dropped_when_the_speaker_goes_on(
    engines: Engines,
) -> None:
    # A pause of 0.7 s within a turn that ends after 1.5 s of silence: a final is decoded
    # in the pause, then the speaker goes on, and the turn's final is decoded again.
    second = read_recording("librivox/sense_and_sensibility_01_austen_64kb-0880.wav")
    audio = np.concatenate([SILENCE[:8_000], SPEECH, SILENCE[:11_200], second, SILENCE, SILENCE])
    session = await heard_live(engines, audio, {"silence_duration_ms": 1500})
    assert [event["type"] for event in session.events].count(COMMITTED) == 1
    in_pause, final = session.finals
    assert not in_pause.committed and not final.committed
    assert in_pause.audio.size < SPEECH.size + 11_200 < final.audio.size
    completed = next(event for event in session.events if event["type"] == COMPLETED)
    assert completed["transcript"] == batch(engines, final.audio)
    assert completed["transcript"] != batch(engines, in_pause.audio)


async def test_a_turn_committed_whole_is_not_given_a_final_of_part_of_it(
    engines: Engines,
) -> None:
    # The node stops after a final was decoded ahead (the recording ends in a moment of
    # silence) but before the silence has lasted 500 ms: the turn is committed as it
    # stands, and its final hears all of it, not the part the one decoded ahead heard.
    audio = np.concatenate([SILENCE[:8_000], SPEECH, SILENCE[:3_200]])
    session = await heard_live(engines, audio, then_finish=True)
    ahead, final = session.finals
    assert not ahead.committed and final.committed
    assert ahead.audio.size < final.audio.size
    completed = next(event for event in session.events if event["type"] == COMPLETED)
    assert completed["transcript"] == batch(engines, final.audio)


async def test_a_final_decoded_ahead_is_dropped_when_the_settings_change(
    engines: Engines,
) -> None:
    # The language changes while the speaker is silent, after a final was decoded ahead:
    # the turn's final is decoded again, in the language the session has at its commit.
    french = {
        "type": "session.update",
        "session": {
            "type": "transcription",
            "audio": {"input": {"transcription": {"language": "fr"}}},
        },
    }
    session = await heard_live(
        engines, np.concatenate([SILENCE[:8_000], SPEECH]), then=(french, SILENCE)
    )
    ahead, final = session.finals
    assert not ahead.committed and not final.committed
    assert (ahead.options.language, final.options.language) == ("en", "fr")
    assert ahead.audio.size == final.audio.size
