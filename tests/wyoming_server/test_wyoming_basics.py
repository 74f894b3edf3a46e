"""describe, synthesize and transcribe over Wyoming, each logged and billed as the bound
key's request."""

from __future__ import annotations

import pytest
from bench.speech_set import real_clips
from bench.wer import word_error_rate
from sqlalchemy import select
from wyoming.asr import Transcribe
from wyoming.info import Describe
from wyoming.tts import Synthesize, SynthesizeVoice

from tests.helpers.voices import JOE
from tests.wyoming_server.client import audio_events, connected, pcm16, read_until, send
from tests.wyoming_server.conftest import Node
from voice_service.core.models import RequestLogEntry, UsageRecord

pytestmark = pytest.mark.anyio


async def _rows(node: Node, key_id: str) -> tuple[list[RequestLogEntry], list[UsageRecord]]:
    async def read(session):  # type: ignore[no-untyped-def]
        logged = await session.scalars(
            select(RequestLogEntry).where(RequestLogEntry.key_id == key_id)
        )
        billed = await session.scalars(select(UsageRecord).where(UsageRecord.key_id == key_id))
        return list(logged), list(billed)

    return await node.tenants.run(read)


async def test_describe_lists_the_keys_voices_and_languages(node: Node) -> None:
    async with connected(node.ports[0]) as client:
        await send(client, Describe())
        answer = await read_until(client, "info")
    (info,) = answer.of("info")
    (tts,) = info.data["tts"]
    assert tts["supports_synthesize_streaming"] is True
    joe = next(voice for voice in tts["voices"] if voice["name"] == JOE)
    assert joe["description"] == "Piper Joe (English, United States)" and joe["languages"] == [
        "en-US"
    ]
    (asr,) = info.data["asr"]
    assert "en" in asr["models"][0]["languages"]


async def test_synthesize_by_voice_name(node: Node) -> None:
    text = "Good evening. The lights in the kitchen are off."
    async with connected(node.ports[0]) as client:
        await send(client, Synthesize(text=text, voice=SynthesizeVoice(name=JOE)))
        answer = await read_until(client, "audio-stop")
    assert answer.error is None, answer.error
    assert answer.rate == 22_050
    seconds = len(answer.audio) / 2 / answer.rate
    assert 1.5 < seconds < 6


async def test_transcribe_a_real_recording(node: Node) -> None:
    clip = real_clips()[0]
    async with connected(node.ports[0]) as client:
        await send(client, Transcribe(language="en"), *audio_events(pcm16(clip.audio), 16_000))
        answer = await read_until(client, "transcript-stop")
    assert answer.error is None, answer.error
    (transcript,) = answer.of("transcript")
    assert word_error_rate(clip.text, transcript.data["text"]) < 0.2, transcript.data
