"""Choosing a model per request (`model`, `model_id`, Wyoming's `name`) among those the
operator offers (VOICE_SERVICE_WHISPER_MODELS), on a node with two real Whisper models: base
pulled from the loopback Hub, and the packaged files as a model the operator converted
(`custom`, WHISPER_MODEL_DIR). The memory budget and the idle time are proven by the
loader's own count of loads and unloads."""

from __future__ import annotations

import asyncio
import base64
import logging
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import openai
import pytest
from bench.hub import BASE, answer, models, running_hub
from bench.speech_set import Clip, real_clips
from openai import AsyncOpenAI
from wyoming.asr import Transcribe
from wyoming.info import Describe

from tests.helpers.app import Tenant, Tenants, make_settings
from tests.helpers.live import LiveServer, serving
from tests.helpers.waiting import eventually
from tests.helpers.wyoming import (
    Books,
    Node,
    audio_events,
    connected,
    new_rows,
    pcm16,
    read_until,
    send,
    wyoming_node,
)
from voice_service.audio.encode import FORMATS, OutputFormat, encode, wav_of
from voice_service.engines.protocols import Pcm
from voice_service.inference.engines import Engines, load_transcribers
from voice_service.inference.transcribers import Transcribers

# Each model's files are 148 MB: a budget of 200 holds one.
ONE_MODEL_MB = 200
PCM = FORMATS[OutputFormat.PCM]  # OpenAI's audio/pcm: 16-bit, 24 kHz


@pytest.fixture(scope="module")
def pulled(tmp_path_factory: pytest.TempPathFactory, base_files: Path) -> Path:
    """A data dir with base pulled from the Hub, and the packaged files in `converted/`."""
    data_dir = tmp_path_factory.mktemp("pulled")
    served = {(BASE.repo, BASE.revision, f.name): base_files / f.name for f in BASE.files}
    with running_hub(served) as hub:
        answer(models(data_dir, hub, "pull", "base", "--json"))
    shutil.copytree(base_files, data_dir / "converted")
    return data_dir


@pytest.fixture(scope="module")
def clip() -> Clip:
    return real_clips()[0]  # a real person reading


def offering(
    pulled: Path, data_dir: Path, engines: Engines, database_url: str, **settings: object
) -> tuple[dict[str, object], Engines]:
    """The settings of a node offering custom (the default) and base in `data_dir` (a copy
    of `pulled`), and its engines: the session's speech engines, its own Whisper models."""
    shutil.copytree(pulled, data_dir)
    overrides = {
        "whisper_models": "custom,base",
        "whisper_model_dir": data_dir / "converted",
        **settings,
    }
    configured = make_settings(data_dir, database_url, **overrides)
    offered = Engines(
        engines.speakers, load_transcribers(configured), engines.cloner, diarizer=engines.diarizer
    )
    return overrides, offered


def node(
    pulled: Path, tmp_path: Path, engines: Engines, database_url: str, **settings: object
) -> Iterator[LiveServer]:
    data_dir = tmp_path / "data"
    overrides, offered = offering(pulled, data_dir, engines, database_url, **settings)
    with serving(make_settings(data_dir, database_url, **overrides), offered) as server:
        yield server


@pytest.fixture
def tight(
    pulled: Path, tmp_path: Path, engines: Engines, database_url: str
) -> Iterator[LiveServer]:
    """Room for one model."""
    yield from node(pulled, tmp_path, engines, database_url, model_memory_mb=ONE_MODEL_MB)


def shelf(server: LiveServer | Node) -> Transcribers:
    transcribers = server.app.state.context.engines.transcribers
    assert isinstance(transcribers, Transcribers)
    return transcribers


def posted(
    server: LiveServer, path: str, tenant: Tenant, clip: Clip, **fields: str
) -> httpx.Response:
    """The clip, in English, to the native `path` with `fields`."""
    return httpx.post(
        f"{server.root}/api/v1{path}",
        headers=tenant.headers,
        files={"file": ("person.wav", wav_of(clip.audio, 16_000), "audio/wav")},
        data={"language": "en", **fields},
        timeout=120,
    )


def listed(server: LiveServer, headers: dict[str, str]) -> list[tuple[str, bool, bool]]:
    """GET /api/v1/models: each model's name, whether it is the default, and loaded."""
    answered = httpx.get(f"{server.root}/api/v1/models", headers=headers, timeout=30)
    assert answered.status_code == 200, answered.text
    return [(m["model_id"], m["default"], m["loaded"]) for m in answered.json()["models"]]


def test_the_openai_sdk_chooses_a_pulled_model_and_the_budget_unloads_the_idle_one(
    tight: LiveServer, clip: Clip
) -> None:
    tenant = tight.tenant()
    client = openai.OpenAI(base_url=f"{tight.root}/v1", api_key=tenant.secret, max_retries=0)
    assert {"whisper-1", "custom", "base"} <= {model.id for model in client.models.list()}
    assert client.models.retrieve("base").id == "base"
    assert listed(tight, tenant.headers) == [("custom", True, True), ("base", False, False)]
    audio = ("person.wav", wav_of(clip.audio, 16_000), "audio/wav")

    text = client.audio.transcriptions.create(model="base", file=audio, language="en").text
    edits, words = clip.errors(text)
    assert edits <= words // 5, text
    # Loading base left no room for the default beside it: the idle default was unloaded.
    assert shelf(tight).loads == Counter(custom=1, base=1)
    assert shelf(tight).unloads == Counter(custom=1)
    assert listed(tight, tenant.headers) == [("custom", True, False), ("base", False, True)]

    # whisper-1 names the default, which comes back in base's place.
    raw = client.audio.transcriptions.with_raw_response.create(
        model="whisper-1", file=audio, language="en"
    )
    assert raw.parse().text == text  # the same weights under two names
    assert tight.log_row(raw.headers["x-request-id"]).model == "custom"
    assert shelf(tight).loads == Counter(custom=2, base=1)
    assert shelf(tight).unloads == Counter(custom=1, base=1)


def test_a_model_not_offered_is_a_400_naming_the_ones_that_are_and_costs_nothing(
    tight: LiveServer, clip: Clip
) -> None:
    tenant = tight.tenant()
    client = openai.OpenAI(base_url=f"{tight.root}/v1", api_key=tenant.secret, max_retries=0)
    audio = ("person.wav", wav_of(clip.audio, 16_000), "audio/wav")
    with pytest.raises(openai.BadRequestError) as refused:
        client.audio.transcriptions.create(model="large-v3", file=audio)
    assert refused.value.body == {
        "message": "model: 'large-v3' is not a model this node offers; it offers custom, base "
        "(the first is the default; whisper-1, gpt-4o-transcribe, gpt-4o-mini-transcribe, "
        "gpt-4o-transcribe-diarize name it too).",
        "type": "invalid_request_error",
        "param": "model",
        "code": "invalid_request",
    }
    native = posted(tight, "/speech-to-text", tenant, clip, model_id="large-v3-turbo")
    assert native.status_code == 400
    assert native.json()["error"]["message"] == (
        "model_id: 'large-v3-turbo' is not a model this node offers; it offers custom, base "
        "(the first is the default)."
    )
    assert tight.usage_units(native.headers["x-request-id"]) == []
    assert shelf(tight).loads == Counter(custom=1)  # nothing was loaded for either


def test_every_model_in_use_leaves_no_room_a_502_with_retry_after(
    tight: LiveServer, clip: Clip
) -> None:
    tenant = tight.tenant()
    models_in_use = shelf(tight)
    models_in_use.acquire("custom")  # as a transcription under way holds it
    try:
        refused = posted(tight, "/speech-to-text", tenant, clip, model_id="base")
    finally:
        models_in_use.release("custom")
    assert refused.status_code == 502, refused.text
    assert refused.headers["retry-after"] == "5"
    assert refused.json()["error"]["message"].startswith("This node's memory for models is taken")
    assert tight.usage_units(refused.headers["x-request-id"]) == []
    assert models_in_use.loads == Counter(custom=1) and models_in_use.unloads == Counter()


@pytest.fixture
def forgetful(
    pulled: Path, tmp_path: Path, engines: Engines, database_url: str
) -> Iterator[LiveServer]:
    """Room for both; a model idle for a second is unloaded."""
    yield from node(pulled, tmp_path, engines, database_url, model_idle_seconds=1)


def test_a_model_left_idle_is_unloaded_and_the_default_is_kept(
    forgetful: LiveServer, clip: Clip
) -> None:
    tenant = forgetful.tenant()
    answered = posted(forgetful, "/speech-to-text", tenant, clip, model_id="base")
    assert answered.status_code == 200, answered.text
    request_id = answered.headers["x-request-id"]
    assert forgetful.usage_units(request_id) == [-(-len(clip.audio) // 16_000)]
    assert forgetful.log_row(request_id).model == "base"
    logged = httpx.get(
        f"{forgetful.root}/api/v1/requests/{request_id}", headers=tenant.headers, timeout=30
    )
    assert logged.json()["model"] == "base", logged.text
    # Both fit the budget: nothing was unloaded to load base.
    assert shelf(forgetful).loads == Counter(custom=1, base=1)
    eventually(lambda: shelf(forgetful).unloads == Counter(base=1), 30)
    assert listed(forgetful, tenant.headers) == [("custom", True, True), ("base", False, False)]


def test_a_pulled_file_altered_since_the_pull_is_refused_at_load_naming_the_repair(
    tight: LiveServer, clip: Clip, caplog: pytest.LogCaptureFixture
) -> None:
    vocabulary = tight.settings.resolved_models_dir / "whisper" / "base" / "vocabulary.txt"
    text = vocabulary.read_bytes()
    vocabulary.write_bytes(text[:-2] + bytes([text[-2] ^ 0x01]) + text[-1:])  # same size
    tenant = tight.tenant()
    with caplog.at_level(logging.ERROR):
        failed = posted(tight, "/speech-to-text", tenant, clip, model_id="base")
    assert failed.status_code == 502
    assert tight.usage_units(failed.headers["x-request-id"]) == []
    assert (
        "the base model's vocabulary.txt has another SHA-256 than the catalogue's; "
        "repair: voice-service models pull base"
    ) in caplog.text
    assert shelf(tight).loads == Counter(custom=1)  # the default was left where it was


def test_a_job_runs_on_the_model_it_asked_for(tight: LiveServer, clip: Clip) -> None:
    tenant = tight.tenant()
    submitted = posted(tight, "/transcription-jobs", tenant, clip, model_id="base")
    assert submitted.status_code == 202, submitted.text
    assert submitted.json()["model_id"] == "base"
    url = f"{tight.root}/api/v1/transcription-jobs/{submitted.json()['id']}"

    def settled() -> dict[str, object] | None:
        job: dict[str, object] = httpx.get(url, headers=tenant.headers, timeout=30).json()
        return job if job["status"] in ("completed", "failed") else None

    job = eventually(settled, 120)
    assert job["status"] == "completed", job
    result = job["result"]
    assert isinstance(result, dict)
    edits, words = clip.errors(result["text"])
    assert edits <= words // 5, result["text"]
    assert shelf(tight).loads == Counter(custom=1, base=1)


@pytest.mark.anyio
async def test_a_live_session_chooses_a_model_and_refuses_one_not_offered(
    tight: LiveServer, clip: Clip
) -> None:
    tenant = await tight.tenants.create()
    client = AsyncOpenAI(base_url=f"{tight.root}/v1", api_key=tenant.secret, max_retries=0)
    pcm = encode([Pcm(np.round(clip.audio * 32767).astype(np.int16), 16_000)], PCM)
    async with client.realtime.connect(extra_query={"intent": "transcription"}) as connection:
        assert (await connection.recv()).type == "session.created"
        for model in ("large-v3", "base"):
            await connection.session.update(session=_transcription_session(model))
        refused = await connection.recv()
        assert refused.type == "error", refused
        assert refused.error.param == "session.audio.input.transcription.model"
        assert refused.error.message.startswith("model: 'large-v3' is not a model this node")
        assert (await connection.recv()).type == "session.updated"
        await connection.input_audio_buffer.append(audio=base64.b64encode(pcm).decode())
        await connection.input_audio_buffer.commit()
        async with asyncio.timeout(120):
            async for event in connection:
                if event.type == "conversation.item.input_audio_transcription.completed":
                    transcript = event.transcript
                    break
                assert event.type != "error", event
    edits, words = clip.errors(transcript)
    assert edits <= words // 5, transcript
    assert shelf(tight).loads == Counter(custom=1, base=1)
    (session,) = (await new_rows(tight.tenants, tenant.key_id, Books([], []))).logged
    assert (session.status, session.model) == (101, "base")


def _transcription_session(model: str) -> Any:
    return {
        "type": "transcription",
        "audio": {
            "input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "transcription": {"model": model, "language": "en"},
                "turn_detection": None,
            }
        },
    }


@pytest.mark.anyio
async def test_wyoming_describes_each_model_and_transcribe_names_one(
    pulled: Path, tmp_path: Path, engines: Engines, database_url: str, clip: Clip
) -> None:
    data_dir = tmp_path / "data"
    overrides, offered = offering(
        pulled, data_dir, engines, database_url, model_memory_mb=ONE_MODEL_MB
    )
    key = await Tenants(make_settings(data_dir, database_url)).create()
    async with wyoming_node(data_dir, database_url, offered, [key], **overrides) as node:
        async with connected(node.ports[0]) as client:
            await send(client, Describe())
            (info,) = (await read_until(client, "info")).of("info")
            (asr,) = info.data["asr"]
            assert [model["name"] for model in asr["models"]] == ["custom", "base"]
            await send(client, Transcribe(name="large-v3"))
            refused = await read_until(client, "error")
            assert refused.error == {
                "text": "\"name\": 'large-v3' is not a model this node offers; it offers custom, "
                "base (the first is the default; whisper, provider name it too).",
                "code": "INVALID_REQUEST",
            }
        async with connected(node.ports[0]) as client:
            events = audio_events(pcm16(clip.audio), 16_000)
            await send(client, Transcribe(name="base", language="en"), *events)
            answer = await read_until(client, "transcript-stop")
        assert answer.error is None, answer.error
        (transcript,) = answer.of("transcript")
        edits, words = clip.errors(transcript.data["text"])
        assert edits <= words // 5, transcript.data
        assert shelf(node).loads == Counter(custom=1, base=1)
        logged = (await new_rows(node.tenants, key.key_id, Books([], []), count=3)).logged
        heard = [(row.status, row.model) for row in logged if row.path == "/wyoming/transcribe"]
        assert sorted(heard, key=str) == [(200, "base"), (400, None)]
