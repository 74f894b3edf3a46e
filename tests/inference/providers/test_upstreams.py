"""A node that sends inference to real upstreams: faster-whisper-server (PyPI) transcribes,
a second Voice Service node speaks and transcribes through its /v1. Which engine answered
is read from the upstream's own evidence (its access log, its request log and usage), and
what the customer pays from this node's usage, counted by our own decoder and characters."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from tests.helpers.app import Tenant, Tenants, fresh_database, make_settings, running
from tests.helpers.live import LiveServer, audio_duration, serving
from tests.helpers.speakers import CALLER, READER, conversation, diarizer_runs, who_said
from tests.helpers.speech_clips import ENGLISH_TEXT, english_speech, write_audio
from tests.helpers.upstreams import FasterWhisperServer, faster_whisper_server, providers_file
from voice_service.app import create_app
from voice_service.core.ids import catalogue_voice_id
from voice_service.core.models import RequestLogEntry, UsageRecord
from voice_service.inference.engines import Engines
from voice_service.settings import Settings

pytestmark = pytest.mark.anyio
SPOKEN = "Providers speak for this node now."


@pytest.fixture(scope="module")
def whisper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FasterWhisperServer]:
    with faster_whisper_server(tmp_path_factory.mktemp("fws")) as server:
        yield server


@pytest.fixture(scope="module")
def node_b(tmp_path_factory: pytest.TempPathFactory, engines: Engines) -> Iterator[LiveServer]:
    """The second node: its own database, the suite's engines."""
    directory = tmp_path_factory.mktemp("node-b")
    with (
        fresh_database(directory) as url,
        serving(make_settings(directory, url), engines) as server,
    ):
        yield server


@pytest.fixture(scope="module")
def node_b_tenant(node_b: LiveServer) -> Tenant:
    return node_b.tenant()


@pytest.fixture
def clip(tmp_path: Path) -> Path:
    return write_audio(tmp_path / "clip.wav", english_speech(), "wav-s16")


def _settings(tmp_path: Path, database_url: str, toml: str, **overrides: object) -> Settings:
    path = providers_file(tmp_path / "providers.toml", toml)
    return make_settings(tmp_path, database_url, providers_file=path, **overrides)


def _node_b_provider(node_b: LiveServer, tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> str:
    """Node B's `[[provider]]` table, `tenant`'s key its key; its sections follow."""
    monkeypatch.setenv("NODE_B_KEY", tenant.secret)
    return f"""
[[provider]]
name = "node-b"
kind = "openai"
base_urls = ["{node_b.root}/v1"]
api_key_env = "NODE_B_KEY"
timeout_seconds = 120
"""


@pytest.fixture
def gateway_toml(
    whisper_server: FasterWhisperServer,
    node_b: LiveServer,
    monkeypatch: pytest.MonkeyPatch,
    node_b_tenant: Tenant,
) -> str:
    return (
        _node_b_provider(node_b, node_b_tenant, monkeypatch)
        + f"""
[provider.transcription]
languages = ["de"]

[provider.speech]
voices = [
  {{ voice = "alloy", name = "Joe (node B)", language = "en" }},
]

[[provider]]
name = "gpu-whisper"
kind = "openai"
base_urls = ["{whisper_server.v1}"]
timeout_seconds = 120

[provider.transcription]
model = "base"
languages = ["*"]
"""
    )


@pytest.fixture
async def gateway(
    tmp_path: Path, database_url: str, gateway_toml: str, engines: Engines
) -> AsyncIterator[tuple[httpx.AsyncClient, FastAPI, Tenant]]:
    settings = _settings(tmp_path, database_url, gateway_toml)
    app = create_app(settings, engines)
    async with running(app) as client:
        yield client, app, await Tenants(settings).create()


async def test_transcription_goes_to_the_first_provider_that_takes_any_language(
    gateway: tuple[httpx.AsyncClient, FastAPI, Tenant],
    whisper_server: FasterWhisperServer,
    clip: Path,
) -> None:
    client, app, tenant = gateway
    before = whisper_server.transcriptions_answered()
    response = await client.post(
        "/speech-to-text", headers=tenant.headers, files={"file": clip.open("rb")}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["language"] == "en"  # asked of it in verbose_json, as it detected it
    assert _letters(body["text"]) == _letters(ENGLISH_TEXT)  # "riverbank" or "river bank"
    assert whisper_server.transcriptions_answered() == before + 1
    # Billed here, in our decoder's seconds; the local Whisper never ran.
    seconds = english_speech().duration_seconds
    assert await _units(app, body["request_id"]) == [math.ceil(seconds)]
    exposition = app.state.context.metrics.exposition().decode()
    assert 'voice_service_provider_requests_total{outcome="ok",provider="gpu-whisper"} 1.0' in (
        exposition
    )
    assert 'voice_service_inference_seconds_count{engine="whisper"}' not in exposition


async def test_a_language_a_provider_names_goes_there_and_others_by_file_order(
    gateway: tuple[httpx.AsyncClient, FastAPI, Tenant],
    whisper_server: FasterWhisperServer,
    node_b: LiveServer,
    clip: Path,
) -> None:
    client, _app, tenant = gateway
    before = whisper_server.transcriptions_answered()
    german = await client.post(
        "/speech-to-text",
        headers=tenant.headers,
        files={"file": clip.open("rb")},
        data={"language": "de"},
    )
    assert german.status_code == 200, german.text
    assert german.json()["language"] == "de"
    row = await _last_row(node_b, "/v1/audio/transcriptions")
    assert row is not None and row.status == 200
    assert whisper_server.transcriptions_answered() == before  # node B took it
    english = await client.post(
        "/speech-to-text",
        headers=tenant.headers,
        files={"file": clip.open("rb")},
        data={"language": "en"},
    )
    assert english.status_code == 200, english.text
    assert whisper_server.transcriptions_answered() == before + 1


async def test_a_provider_voice_is_in_the_catalogue_and_speaks_there(
    gateway: tuple[httpx.AsyncClient, FastAPI, Tenant],
    node_b: LiveServer,
    node_b_tenant: Tenant,
) -> None:
    client, app, tenant = gateway
    voices = (await client.get("/voices", headers=tenant.headers)).json()["voices"]
    voice_id = catalogue_voice_id("node-b:alloy")  # from the file: the same on every node
    assert voices[0] == {**voices[0], "id": voice_id, "name": "Joe (node B)", "language": "en"}
    response = await client.post(
        "/text-to-speech", headers=tenant.headers, json={"voice_id": voice_id, "text": SPOKEN}
    )
    assert response.status_code == 200, response.text
    codec, _rate, seconds = audio_duration(response.content)
    assert codec.startswith("mp3") and seconds > 1.0
    request_id = response.headers["x-request-id"]
    assert await _units(app, request_id) == [len(SPOKEN)]
    # Node B made it, billed to the key in the providers file.
    row = await _last_row(node_b, "/v1/audio/speech")
    assert row is not None and row.status == 200 and row.org_id == node_b_tenant.org_id
    assert await asyncio.to_thread(node_b.usage_units, row.request_id) == [len(SPOKEN)]


async def test_timestamps_of_a_voice_whose_provider_reports_none_are_refused(
    gateway: tuple[httpx.AsyncClient, FastAPI, Tenant], node_b: LiveServer
) -> None:
    client, app, tenant = gateway
    body = {"voice_id": catalogue_voice_id("node-b:alloy"), "text": SPOKEN}
    before = await _last_row(node_b, "/v1/audio/speech")
    for path in ("/text-to-speech/with-timestamps", "/text-to-speech/with-timestamps/stream"):
        response = await client.post(path, headers=tenant.headers, json=body)
        assert response.status_code == 400, response.text
        assert "reports no timestamps" in response.json()["error"]["message"]
        assert await _units(app, response.headers["x-request-id"]) == []
    after = await _last_row(node_b, "/v1/audio/speech")  # refused here: node B never asked
    assert (after and after.request_id) == (before and before.request_id)


async def test_openai_formats_come_through_from_the_provider(
    gateway: tuple[httpx.AsyncClient, FastAPI, Tenant], node_b: LiveServer
) -> None:
    client, _app, tenant = gateway
    voice_id = catalogue_voice_id("node-b:alloy")
    async with httpx.AsyncClient(
        transport=client._transport, base_url="http://testserver", timeout=120
    ) as root:
        response = await root.post(
            "/v1/audio/speech",
            headers=tenant.headers,
            json={"model": "tts-1", "voice": voice_id, "input": SPOKEN, "response_format": "wav"},
        )
    assert response.status_code == 200, response.text
    assert response.content[:4] == b"RIFF"
    codec, _rate, seconds = audio_duration(response.content)
    assert codec == "pcm_s16le" and seconds > 1.0


def _letters(text: str) -> str:
    return "".join(c for c in text.lower() if c.isalpha())


async def _units(app: FastAPI, request_id: str) -> list[int]:
    async with app.state.context.sessions() as session:
        rows = await session.scalars(select(UsageRecord).filter_by(request_id=request_id))
        return [row.units for row in rows]


async def _last_row(node: LiveServer, path: str) -> RequestLogEntry | None:
    """The upstream node's newest log row for `path` (its own loop runs `query`)."""
    statement = (
        select(RequestLogEntry)
        .filter_by(path=path)
        .order_by(RequestLogEntry.created_at.desc())
        .limit(1)
    )
    return await asyncio.to_thread(node.query, statement)


async def test_a_node_with_only_providers_serves_both_apis_and_the_console(
    tmp_path: Path, database_url: str, gateway_toml: str, clip: Path
) -> None:
    settings = _settings(tmp_path, database_url, gateway_toml, tts_engines="", stt_engines="")
    light = Engines.load(settings)  # nothing loaded: no model in this process's memory
    assert light.speakers == {} and light.transcribers is None
    app = create_app(settings, light)
    tenant = await Tenants(settings).create()
    async with running(app) as client:
        voices = (await client.get("/voices", headers=tenant.headers)).json()["voices"]
        assert [voice["name"] for voice in voices] == ["Joe (node B)"]
        async with httpx.AsyncClient(
            transport=client._transport, base_url="http://testserver", timeout=120
        ) as root:
            # OpenAI's names speak with the first English voice where Joe is not loaded.
            speech = await root.post(
                "/v1/audio/speech",
                headers=tenant.headers,
                json={"model": "tts-1", "voice": "alloy", "input": SPOKEN},
            )
            assert speech.status_code == 200, speech.text
            transcript = await root.post(
                "/v1/audio/transcriptions",
                headers=tenant.headers,
                files={"file": clip.open("rb")},
                data={"model": "whisper-1", "language": "en"},
            )
            assert transcript.status_code == 200, transcript.text
            assert _letters(transcript.json()["text"]) == _letters(ENGLISH_TEXT)
            console = await root.get("/console/", headers={"Accept": "text/html"})
            assert console.status_code in (200, 303)
            ready = await root.get("/readyz")
        assert ready.status_code == 200
        report = ready.json()
        assert report["checks"] == {"engines": True, "database": True, "providers": True}
        assert report["providers"]["gpu-whisper"]["replicas"][0]["state"] == "up"
        assert set(report["providers"]) == {"node-b", "gpu-whisper"}


async def test_timed_formats_and_translation_come_from_the_providers_segments(
    gateway: tuple[httpx.AsyncClient, FastAPI, Tenant],
    whisper_server: FasterWhisperServer,
    clip: Path,
) -> None:
    client, app, tenant = gateway
    before = whisper_server.transcriptions_answered()
    async with httpx.AsyncClient(
        transport=client._transport, base_url="http://testserver", timeout=120
    ) as root:
        srt = await root.post(
            "/v1/audio/transcriptions",
            headers=tenant.headers,
            files={"file": clip.open("rb")},
            data={"model": "whisper-1", "response_format": "srt"},
        )
        assert srt.status_code == 200, srt.text
        first, times, *text = srt.text.strip().splitlines()
        assert first == "1" and times.startswith("00:00:00,000 --> 00:00:0")
        assert _letters(" ".join(text)).startswith("thequickbrownfox")
        verbose = await root.post(
            "/v1/audio/transcriptions",
            headers=tenant.headers,
            files={"file": clip.open("rb")},
            data={"model": "whisper-1", "response_format": "verbose_json"},
        )
        body = verbose.json()
        assert body["language"] == "en"
        assert body["duration"] == pytest.approx(english_speech().duration_seconds, abs=0.01)
        assert body["segments"][0]["tokens"]  # the upstream decoder's own
    assert whisper_server.transcriptions_answered() == before + 2
    exposition = app.state.context.metrics.exposition().decode()
    assert 'voice_service_provider_requests_total{outcome="ok",provider="gpu-whisper"} 2.0' in (
        exposition
    )


async def test_an_openai_compatible_upstream_that_diarizes_tells_the_speakers_apart(
    tmp_path: Path,
    database_url: str,
    engines: Engines,
    node_b: LiveServer,
    node_b_tenant: Tenant,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Node B answers diarized_json, as OpenAI's diarizing model does; a request it cannot
    take whole (a count of speakers, word times) is told apart here instead."""
    toml = (
        _node_b_provider(node_b, node_b_tenant, monkeypatch)
        + """
[provider.transcription]
languages = ["*"]
diarize = true
"""
    )
    settings = _settings(tmp_path, database_url, toml)
    app = create_app(settings, engines)
    audio, truth = conversation([(READER, 0), (CALLER, 4), (READER, 2), (CALLER, 1)])

    async def diarized(**fields: str) -> httpx.Response:
        return await client.post(
            "/speech-to-text",
            headers=tenant.headers,
            files={"file": ("talk.wav", audio, "audio/wav")},
            data={"language": "en", "diarize": "true", **fields},
        )

    async with running(app) as client:
        tenant = await Tenants(settings).create()
        upstream_runs = diarizer_runs(node_b.app)
        response = await diarized()
        assert response.status_code == 200, response.text
        body = response.json()
        assert who_said(body["segments"], truth) == {"speaker_0": READER, "speaker_1": CALLER}
        assert (diarizer_runs(app), diarizer_runs(node_b.app)) == (0, upstream_runs + 1)
        row = await _last_row(node_b, "/v1/audio/transcriptions")
        assert row is not None and row.status == 200
        _codec, _rate, seconds = audio_duration(audio)  # billed here, as any transcription
        assert await _units(app, body["request_id"]) == [math.ceil(seconds)]

        for fields in ({"num_speakers": "2"}, {"timestamps": "word"}):
            response = await diarized(**fields)
            assert response.status_code == 200, response.text
            segments = response.json()["segments"]
            assert who_said(segments, truth) == {"speaker_0": READER, "speaker_1": CALLER}
        # Both told apart here: node B only transcribed them.
        assert (diarizer_runs(app), diarizer_runs(node_b.app)) == (2, upstream_runs + 1)
        assert all(word["speaker"] for segment in segments for word in segment["words"])
