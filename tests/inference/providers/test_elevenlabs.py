"""ElevenLabs as a provider, through a peer that speaks its documented endpoints (the hosted
API cannot run here): speech, transcription and instant clones, each proven from what the
peer received, and billed here by our own count."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from tests.helpers.api import assert_error, clone, raised_voice_sample
from tests.helpers.app import Tenant, Tenants, make_settings, running
from tests.helpers.elevenlabs_peer import RACHEL, ElevenLabsPeer, elevenlabs_peer
from tests.helpers.live import audio_duration
from tests.helpers.speech_clips import english_speech, write_audio
from tests.helpers.upstreams import providers_file
from voice_service.app import create_app
from voice_service.audio.encode import wav_of
from voice_service.core.ids import catalogue_voice_id
from voice_service.core.models import UsageRecord, Voice
from voice_service.inference.engines import Engines

pytestmark = pytest.mark.anyio
TEXT = "Hello from ElevenLabs."


@pytest.fixture(scope="module")
def peer() -> Iterator[ElevenLabsPeer]:
    with elevenlabs_peer() as running_peer:
        yield running_peer


@pytest.fixture
async def node(
    tmp_path: Path,
    database_url: str,
    engines: Engines,
    peer: ElevenLabsPeer,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[tuple[httpx.AsyncClient, FastAPI, Tenant]]:
    peer.reset()
    monkeypatch.setenv("ELEVEN_KEY", peer.api_key)
    toml = f"""
[[provider]]
name = "eleven"
kind = "elevenlabs"
base_urls = ["{peer.base_url}"]
api_key_env = "ELEVEN_KEY"
timeout_seconds = 30

[provider.transcription]
model = "scribe_v1"
languages = ["*"]
diarize = true

[provider.speech]
voices = [{{ voice = "{RACHEL}", name = "Rachel", language = "en" }}]

[provider.cloning]
"""
    path = providers_file(tmp_path / "providers.toml", toml)
    settings = make_settings(tmp_path, database_url, providers_file=path)
    app = create_app(settings, engines)
    async with running(app) as client:
        yield client, app, await Tenants(settings).create()


async def test_speech_is_made_there_and_passed_through(
    node: tuple[httpx.AsyncClient, FastAPI, Tenant], peer: ElevenLabsPeer
) -> None:
    client, app, tenant = node
    voice_id = catalogue_voice_id(f"eleven:{RACHEL}")
    response = await client.post(
        "/text-to-speech", headers=tenant.headers, json={"voice_id": voice_id, "text": TEXT}
    )
    assert response.status_code == 200, response.text
    codec, rate, _seconds = audio_duration(response.content)
    assert codec.startswith("mp3") and rate == 44100  # ElevenLabs' own MP3, as it came
    (asked,) = [r for r in peer.requests if r.path.startswith("/v1/text-to-speech/")]
    assert asked.path == f"/v1/text-to-speech/{RACHEL}/stream"
    assert asked.query["output_format"] == "mp3_44100_128"
    assert asked.headers["xi-api-key"] == peer.api_key
    assert asked.json["text"] == TEXT
    assert await _units(app, response.headers["x-request-id"]) == [len(TEXT)]


async def test_a_format_elevenlabs_lacks_is_encoded_here_from_its_pcm(
    node: tuple[httpx.AsyncClient, FastAPI, Tenant], peer: ElevenLabsPeer
) -> None:
    client, _app, tenant = node
    async with httpx.AsyncClient(
        transport=client._transport, base_url="http://testserver", timeout=60
    ) as root:
        response = await root.post(
            "/v1/audio/speech",
            headers=tenant.headers,
            json={
                "model": "tts-1",
                "voice": catalogue_voice_id(f"eleven:{RACHEL}"),
                "input": TEXT,
                "response_format": "flac",
            },
        )
    assert response.status_code == 200, response.text
    codec, rate, seconds = audio_duration(response.content)
    assert (codec, rate) == ("flac", 24000)
    assert seconds == pytest.approx(0.06 * len(TEXT), abs=0.01)  # every sample it sent
    (asked,) = [r for r in peer.requests if r.path.startswith("/v1/text-to-speech/")]
    assert asked.query["output_format"] == "pcm_24000"


async def test_timestamps_are_made_there_and_passed_through(
    node: tuple[httpx.AsyncClient, FastAPI, Tenant], peer: ElevenLabsPeer
) -> None:
    client, app, tenant = node
    body = {"voice_id": catalogue_voice_id(f"eleven:{RACHEL}"), "text": TEXT}
    whole = await client.post(
        "/text-to-speech/with-timestamps",
        params={"output_format": "pcm_16000"},
        headers=tenant.headers,
        json=body,
    )
    assert whole.status_code == 200, whole.text
    lines = await client.post(
        "/text-to-speech/with-timestamps/stream", headers=tenant.headers, json=body
    )
    assert lines.status_code == 200, lines.text
    (line,) = [json.loads(text) for text in lines.text.splitlines()]  # one answer, whole
    for answer, seconds in ((whole.json(), 2 * 16_000), (line, None)):
        alignment = answer["alignment"]
        assert alignment["characters"] == list(TEXT)  # the peer's times, as it sent them
        assert alignment["character_start_times_seconds"][:2] == [0.0, 0.06]
        assert alignment["character_end_times_seconds"][-1] == pytest.approx(0.06 * len(TEXT))
        audio = base64.b64decode(answer["audio_base64"])
        if seconds is not None:  # raw PCM at 16 kHz: every sample the peer made
            assert len(audio) / seconds == pytest.approx(0.06 * len(TEXT), abs=0.001)
        else:  # ElevenLabs' own MP3, as it came
            codec, rate, _seconds = audio_duration(audio)
            assert codec.startswith("mp3") and rate == 44100
    asked = [r for r in peer.requests if r.path.startswith("/v1/text-to-speech/")]
    assert [(r.path, r.query["output_format"]) for r in asked] == [
        (f"/v1/text-to-speech/{RACHEL}/with-timestamps", "pcm_16000"),
        (f"/v1/text-to-speech/{RACHEL}/with-timestamps", "mp3_44100_128"),
    ]
    for response in (whole, lines):
        assert await _units(app, response.headers["x-request-id"]) == [len(TEXT)]


async def test_its_timed_speech_at_another_speed_is_refused_before_it_is_asked(
    node: tuple[httpx.AsyncClient, FastAPI, Tenant], peer: ElevenLabsPeer
) -> None:
    client, app, tenant = node
    asked_before = len(peer.requests)
    body = {
        "voice_id": catalogue_voice_id(f"eleven:{RACHEL}"),
        "text": TEXT,
        "voice_settings": {"speed": 1.2},
    }
    response = await client.post(
        "/text-to-speech/with-timestamps", headers=tenant.headers, json=body
    )
    assert "takes no speed" in assert_error(response, 400, "INVALID_REQUEST")["message"]
    assert len(peer.requests) == asked_before
    assert await _units(app, response.headers["x-request-id"]) == []


async def test_transcription_is_made_there_in_our_seconds_and_codes(
    node: tuple[httpx.AsyncClient, FastAPI, Tenant], peer: ElevenLabsPeer, tmp_path: Path
) -> None:
    client, app, tenant = node
    peer.transcript_text = "Bonjour tout le monde."
    peer.detected_language = "fra"  # ISO 639-3, as ElevenLabs answers
    pcm = english_speech()
    clip = write_audio(tmp_path / "clip.wav", pcm, "wav-s16")
    response = await client.post(
        "/speech-to-text", headers=tenant.headers, files={"file": clip.open("rb")}
    )
    assert response.status_code == 200, response.text
    assert response.json()["text"] == "Bonjour tout le monde."
    assert response.json()["language"] == "fr"
    (asked,) = [r for r in peer.requests if r.path == "/v1/speech-to-text"]
    assert asked.form["model_id"] == "scribe_v1"
    assert asked.files[0].size == clip.stat().st_size  # the file as uploaded
    units = await _units(app, response.json()["request_id"])
    assert units == [math.ceil(pcm.duration_seconds)]


async def test_speakers_are_told_apart_there_when_it_diarizes(
    node: tuple[httpx.AsyncClient, FastAPI, Tenant], peer: ElevenLabsPeer, tmp_path: Path
) -> None:
    client, app, tenant = node
    peer.transcript_text = "Good morning. Hello there. How are you today?"
    pcm = english_speech()
    clip = write_audio(tmp_path / "clip.wav", pcm, "wav-s16")
    before = app.state.context.metrics.exposition().decode().count('engine="diarizer"')
    response = await client.post(
        "/speech-to-text",
        headers=tenant.headers,
        files={"file": clip.open("rb")},
        data={"diarize": "true", "num_speakers": "3", "timestamps": "word"},
    )
    assert response.status_code == 200, response.text
    segments = response.json()["segments"]
    assert [(s["speaker"], s["text"]) for s in segments] == [
        ("speaker_0", "Good morning."),
        ("speaker_1", "Hello there."),
        ("speaker_2", "How are you today?"),
    ]
    assert [w["speaker"] for w in segments[1]["words"]] == ["speaker_1", "speaker_1"]
    (asked,) = [r for r in peer.requests if r.path == "/v1/speech-to-text"]
    assert (asked.form["diarize"], asked.form["num_speakers"]) == ("true", "3")
    # The speakers came from there: this node's diarizer never ran.
    after = app.state.context.metrics.exposition().decode().count('engine="diarizer"')
    assert after == before
    assert await _units(app, response.json()["request_id"]) == [math.ceil(pcm.duration_seconds)]

    # Bounds on their number are not ElevenLabs' to keep: the speakers are told apart here.
    peer.reset()
    peer.transcript_text = "Good morning."
    response = await client.post(
        "/speech-to-text",
        headers=tenant.headers,
        files={"file": clip.open("rb")},
        data={"diarize": "true", "max_speakers": "2"},
    )
    assert response.status_code == 200, response.text
    (asked,) = [r for r in peer.requests if r.path == "/v1/speech-to-text"]
    assert "diarize" not in asked.form
    assert [s["speaker"] for s in response.json()["segments"]] == ["speaker_0"]


async def test_a_clone_is_made_there_speaks_there_and_is_deleted_there(
    node: tuple[httpx.AsyncClient, FastAPI, Tenant], peer: ElevenLabsPeer, tmp_path: Path
) -> None:
    client, app, tenant = node
    response = await clone(client, tenant, raised_voice_sample(tmp_path), name="Mine")
    assert response.status_code == 201, response.text
    voice_id = response.json()["voice"]["id"]
    # Made there: this node has not heard it, so it cannot say how much it resembles.
    assert response.json()["voice"]["resemblance"] is None
    (added,) = [v for v in peer.voices.values() if v.category == "cloned"]
    assert added.name == "Mine"
    async with app.state.context.sessions() as session:
        row = await session.get(Voice, voice_id)
    assert row is not None and row.engine_voice == f"eleven:{added.voice_id}"
    spoken = await client.post(
        "/text-to-speech", headers=tenant.headers, json={"voice_id": voice_id, "text": TEXT}
    )
    assert spoken.status_code == 200, spoken.text
    assert peer.requests[-1].path == f"/v1/text-to-speech/{added.voice_id}/stream"
    deleted = await client.delete(f"/voices/{voice_id}", headers=tenant.headers)
    assert deleted.status_code == 200, deleted.text
    assert added.voice_id not in peer.voices


async def test_a_clone_elevenlabs_refuses_is_not_created_here(
    node: tuple[httpx.AsyncClient, FastAPI, Tenant],
    peer: ElevenLabsPeer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client, app, tenant = node
    noise = np.random.default_rng(3).normal(0, 6000, 16000 * 3).astype(np.int16)
    refused = await clone(client, tenant, wav_of(noise.astype(np.float32) / 32768, 16000))
    # No speech: refused here, as by this node's own cloner, before ElevenLabs is asked.
    assert assert_error(refused, 400, "INVALID_REQUEST")["message"].startswith(
        "file: no usable speech in the sample"
    )
    assert not [r for r in peer.requests if r.path == "/v1/voices/add"]
    peer.fail_next(400, message="The sample is too short.")
    response = await clone(client, tenant, raised_voice_sample(tmp_path))
    error = assert_error(response, 400, "INVALID_REQUEST")
    # In our words; the provider's are the operator's, in the log.
    assert "'eleven' refused the request (400): it did not accept the input" in error["message"]
    assert "too short" not in error["message"]
    assert "provider eleven refused a request (400): The sample is too short." in caplog.text
    assert (await client.get("/voices", headers=tenant.headers)).json()["voices"][-1][
        "type"
    ] == "PROVIDER"
    assert await _units(app, response.headers["x-request-id"]) == []


async def test_a_provider_that_fails_a_delete_keeps_the_clone_here(
    node: tuple[httpx.AsyncClient, FastAPI, Tenant], peer: ElevenLabsPeer, tmp_path: Path
) -> None:
    client, _app, tenant = node
    voice_id = (await clone(client, tenant, raised_voice_sample(tmp_path))).json()["voice"]["id"]
    peer.fail_next(500)
    failed = await client.delete(f"/voices/{voice_id}", headers=tenant.headers)
    assert_error(failed, 502, "PROVIDER_ERROR")
    kept = await client.get(f"/voices/{voice_id}", headers=tenant.headers)
    assert kept.status_code == 200  # whole here, to delete again
    assert (await client.delete(f"/voices/{voice_id}", headers=tenant.headers)).status_code == 200


async def _units(app: FastAPI, request_id: str) -> list[int]:
    async with app.state.context.sessions() as session:
        rows = await session.scalars(select(UsageRecord).filter_by(request_id=request_id))
        return [row.units for row in rows]
