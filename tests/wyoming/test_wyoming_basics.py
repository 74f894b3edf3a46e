"""describe, synthesize and transcribe over Wyoming, driven by the `wyoming` package's own
client, each logged and billed as the bound key's request would be over HTTP."""

from __future__ import annotations

import math
from pathlib import Path

import av
import numpy as np
import pytest
from bench.speech_set import real_clips
from bench.wer import word_error_rate
from wyoming.asr import Transcribe
from wyoming.info import Describe
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeVoice,
)

from tests.helpers.api import clone, raised_voice_sample, transcribe
from tests.helpers.voices import JOE
from tests.helpers.wav import wav_bytes
from tests.helpers.wyoming import (
    Node,
    audio_events,
    books_of,
    connected,
    new_rows,
    pcm16,
    read_until,
    send,
    wire_bytes,
)
from voice_service.core.vocabulary import UsageEndpoint

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("served")]


async def _info(port: int) -> dict[str, list[dict[str, object]]]:
    async with connected(port) as client:
        await send(client, Describe())
        (info,) = (await read_until(client, "info")).of("info")
    return info.data


async def _voices(port: int) -> dict[str, dict[str, object]]:
    (tts,) = (await _info(port))["tts"]
    voices: list[dict[str, object]] = tts["voices"]  # type: ignore[assignment]
    return {str(voice["name"]): voice for voice in voices}


async def test_describe_lists_the_keys_voices_and_languages(node: Node) -> None:
    before = await books_of(node.tenants, node.tenant.key_id)
    info = await _info(node.ports[0])
    (tts,) = info["tts"]
    assert tts["supports_synthesize_streaming"] is True
    voices = {voice["name"]: voice for voice in tts["voices"]}  # type: ignore[attr-defined]
    assert voices[JOE]["description"] == "Piper Joe (English, United States)"
    assert voices[JOE]["languages"] == ["en-US"]
    (asr,) = info["asr"]
    assert {"en", "de", "fr"} <= set(asr["models"][0]["languages"])  # type: ignore[index]
    (row,) = (await new_rows(node.tenants, node.tenant.key_id, before)).logged
    assert (row.method, row.path, row.status) == ("WYOMING", "/wyoming/describe", 200)


async def test_voice_names_are_stable_across_restarts(node: Node) -> None:
    """The names are voice ids, which the catalogue derives from each engine voice."""
    voices = await _voices(node.ports[0])
    assert JOE in voices  # tests.helpers.voices derives it as every node does


async def test_synthesize_by_name_is_billed_its_characters(node: Node) -> None:
    text = "Good evening. The lights in the kitchen are off."
    before = await books_of(node.tenants, node.tenant.key_id)
    async with connected(node.ports[0]) as client:
        await send(client, Synthesize(text=text, voice=SynthesizeVoice(name=JOE)))
        answer = await read_until(client, "audio-stop")
    assert answer.error is None, answer.error
    assert answer.rate == 22_050
    assert 1.5 < len(answer.audio) / 2 / answer.rate < 6
    books = await new_rows(node.tenants, node.tenant.key_id, before)
    (row,) = books.logged
    assert (row.path, row.status, row.error_code) == ("/wyoming/synthesize", 200, None)
    assert row.bytes_sent == await wire_bytes(answer.events)
    (usage,) = books.billed
    assert (usage.endpoint, usage.units, usage.voice_id) == (
        UsageEndpoint.TEXT_TO_SPEECH,
        len(text),
        JOE,
    )


async def test_each_request_on_a_connection_logs_the_bytes_of_its_own_answer(
    node: Node,
) -> None:
    before = await books_of(node.tenants, node.tenant.key_id)
    async with connected(node.ports[0]) as client:
        answers = []
        for text in ("One.", "And another, longer one."):
            await send(client, Synthesize(text=text, voice=SynthesizeVoice(name=JOE)))
            answers.append(await read_until(client, "audio-stop"))
    books = await new_rows(node.tenants, node.tenant.key_id, before, count=2)
    assert [row.bytes_sent for row in books.logged] == [
        await wire_bytes(answer.events) for answer in answers
    ]


async def test_synthesize_by_language_alone(node: Node) -> None:
    voices = await _voices(node.ports[0])
    before = await books_of(node.tenants, node.tenant.key_id)
    async with connected(node.ports[0]) as client:
        voice = SynthesizeVoice(language="de_DE")  # Home Assistant's form; ours is de-DE
        await send(client, Synthesize(text="Guten Morgen.", voice=voice))
        answer = await read_until(client, "audio-stop")
    assert answer.error is None, answer.error
    (usage,) = (await new_rows(node.tenants, node.tenant.key_id, before)).billed
    languages = voices[str(usage.voice_id)]["languages"]
    assert str(languages[0]).startswith("de")  # type: ignore[index]


async def test_synthesize_without_a_voice_speaks_english(node: Node) -> None:
    before = await books_of(node.tenants, node.tenant.key_id)
    async with connected(node.ports[0]) as client:
        await send(client, Synthesize(text="Hello."))
        answer = await read_until(client, "audio-stop")
    assert answer.error is None, answer.error
    (usage,) = (await new_rows(node.tenants, node.tenant.key_id, before)).billed
    assert usage.voice_id == JOE


async def test_a_clone_speaks_for_its_organization_only(node: Node, tmp_path: Path) -> None:
    made = await clone(node.client, node.tenant, raised_voice_sample(tmp_path), name="Kitchen")
    assert made.status_code == 201, made.text
    voice_id = made.json()["voice"]["id"]
    mine, theirs = await _voices(node.ports[0]), await _voices(node.ports[1])
    assert mine[voice_id]["description"] == "Kitchen"
    (language,) = mine[voice_id]["languages"]  # type: ignore[misc]
    assert str(language).startswith("en")  # its base voice's: the bases speak English
    assert voice_id not in theirs
    async with connected(node.ports[0]) as client:
        await send(client, Synthesize(text="Dinner is ready.", voice=SynthesizeVoice(voice_id)))
        answer = await read_until(client, "audio-stop")
    assert answer.error is None and len(answer.audio) > answer.rate  # over half a second
    async with connected(node.ports[1]) as client:
        await send(client, Synthesize(text="Dinner is ready.", voice=SynthesizeVoice(voice_id)))
        refused = await read_until(client, "audio-stop")
    assert refused.error is not None and refused.error["code"] == "NOT_FOUND"
    assert not refused.of("audio-chunk")


async def test_streamed_text_is_spoken_before_it_has_all_arrived(node: Node) -> None:
    """Proven by order: the rest of the text is sent only once audio of the first clause
    has come back."""
    first, rest = "Turning on the lights, ", ["then the heating ", "in the living room."]
    before = await books_of(node.tenants, node.tenant.key_id)
    async with connected(node.ports[0]) as client:
        await send(client, SynthesizeStart(voice=SynthesizeVoice(name=JOE)), SynthesizeChunk(first))
        early = await read_until(client, "audio-chunk")
        assert early.error is None and early.of("audio-chunk"), early.events
        await send(client, *(SynthesizeChunk(text) for text in rest))
        # Home Assistant repeats the whole text for servers that do not stream.
        await send(client, Synthesize(text=first + "".join(rest)), SynthesizeStop())
        answer = await read_until(client, "synthesize-stopped")
    assert answer.error is None, answer.error
    kinds = [event.type for event in early.events + answer.events]
    assert kinds[0] == "audio-start" and kinds.count("audio-start") == 1
    assert kinds[-2:] == ["audio-stop", "synthesize-stopped"]
    books = await new_rows(node.tenants, node.tenant.key_id, before)
    (row,) = books.logged
    assert (row.path, row.status) == ("/wyoming/synthesize-stream", 200)
    (usage,) = books.billed
    assert usage.units == len(first + "".join(rest))  # the repeated text is not billed


async def test_an_organizations_default_dictionaries_say_its_words(node: Node) -> None:
    """Wyoming names no dictionaries: the organization's defaults apply, to its own
    listener only, in both kinds of request."""
    theirs, other = node.keys[1], node.keys[0]
    made = await node.client.post(
        "/pronunciation-dictionaries/add-from-rules",
        headers=theirs.headers,
        json={
            "name": "Brands",
            "rules": [{"type": "alias", "string_to_replace": "VS", "alias": "Voice Service"}],
        },
    )
    path = f"/pronunciation-dictionaries/{made.json()['id']}"
    set_default = await node.client.patch(path, headers=theirs.headers, json={"default": True})
    assert set_default.json()["default"] is True, set_default.text
    text = "Please call VS today."
    try:
        heard = {}
        for port, key in ((node.ports[1], theirs), (node.ports[0], other)):
            async with connected(port) as client:
                await send(client, Synthesize(text=text, voice=SynthesizeVoice(name=JOE)))
                whole = await read_until(client, "audio-stop")
                await send(
                    client,
                    SynthesizeStart(voice=SynthesizeVoice(name=JOE)),
                    SynthesizeChunk(text),
                    SynthesizeStop(),
                )
                streamed = await read_until(client, "synthesize-stopped")
            for kind, answer in (("whole", whole), ("streamed", streamed)):
                assert answer.error is None, answer.error
                wav = wav_bytes(answer.audio, rate=answer.rate)
                said = await transcribe(node.client, key, wav, language="en")
                heard[key.org_id, kind] = str(said.json()["text"]).lower()
    finally:
        await node.client.patch(path, headers=theirs.headers, json={"default": False})
    for kind in ("whole", "streamed"):
        assert "voice service" in heard[theirs.org_id, kind], heard
        assert "voice service" not in heard[other.org_id, kind], heard


def _resampled(samples: np.ndarray, rate: int) -> np.ndarray:  # type: ignore[type-arg]
    resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
    frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="flt", layout="mono")
    frame.sample_rate = 16_000
    frames = [*resampler.resample(frame), *resampler.resample(None)]
    return np.concatenate([f.to_ndarray().reshape(-1) for f in frames])


@pytest.mark.parametrize(("rate", "channels"), [(16_000, 1), (22_050, 2)])
async def test_transcribe_a_real_recording(node: Node, rate: int, channels: int) -> None:
    clip = real_clips()[0]
    samples = clip.audio if rate == 16_000 else _resampled(clip.audio, rate)
    pcm = pcm16(np.repeat(samples, channels))  # interleaved: each sample on every channel
    before = await books_of(node.tenants, node.tenant.key_id)
    async with connected(node.ports[0]) as client:
        events = audio_events(pcm, rate, channels=channels)
        await send(client, Transcribe(language="en-US"), *events)
        answer = await read_until(client, "transcript-stop")
    assert answer.error is None, answer.error
    kinds = [event.type for event in answer.events]
    assert kinds[0] == "transcript-start" and kinds[-2:] == ["transcript", "transcript-stop"]
    (transcript,) = answer.of("transcript")
    assert word_error_rate(clip.text, transcript.data["text"]) < 0.2, transcript.data
    chunks = " ".join(chunk.data["text"] for chunk in answer.of("transcript-chunk"))
    assert chunks == transcript.data["text"]
    books = await new_rows(node.tenants, node.tenant.key_id, before)
    (row,) = books.logged
    assert (row.path, row.status) == ("/wyoming/transcribe", 200)
    assert row.bytes_sent == await wire_bytes(answer.events)
    (usage,) = books.billed
    seconds = len(pcm) / (2 * channels * rate)
    assert (usage.endpoint, usage.units) == (UsageEndpoint.SPEECH_TO_TEXT, math.ceil(seconds))


async def test_nothing_said_is_answered_and_billed_nothing(node: Node) -> None:
    """A streamed synthesis with no text, a transcription with no audio (Home Assistant's
    VAD heard no speech): whole answers, logged, no usage."""
    before = await books_of(node.tenants, node.tenant.key_id)
    async with connected(node.ports[0]) as client:
        await send(client, SynthesizeStart(), SynthesizeStop())
        spoken = await read_until(client, "synthesize-stopped")
        await send(client, Transcribe(language="en"), *audio_events(b"", 16_000))
        heard = await read_until(client, "transcript-stop")
    assert spoken.error is None and not spoken.audio
    assert [event.type for event in spoken.events] == [
        "audio-start",
        "audio-stop",
        "synthesize-stopped",
    ]
    assert heard.error is None and heard.of("transcript")[0].data["text"] == ""
    books = await new_rows(node.tenants, node.tenant.key_id, before, count=2)
    assert [row.status for row in books.logged] == [200, 200]
    assert books.billed == []
