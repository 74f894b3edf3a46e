"""No valid request can exhaust a node: text is spoken in bounded chunks, and every
inference has a deadline after which the caller gets 502 and the worker is free again."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import pytest
from fastapi import FastAPI

from tests.helpers import speech_clips as clips
from tests.helpers.api import (
    assert_error,
    clone,
    mp3_facts,
    raised_voice_sample,
    speak,
    transcribe,
    usage_units,
)
from tests.helpers.app import Tenant, Tenants, running
from tests.helpers.inference import slots_held
from tests.helpers.voices import GERMAN, JOE
from voice_service.app import create_app
from voice_service.books.requestlog.repository import recent_requests
from voice_service.engines.protocols import Pcm
from voice_service.settings import Settings

pytestmark = pytest.mark.anyio

# What speaking may add, per worker: a request alone makes a chunk on every worker at once,
# and what one chunk needs is bounded (Piper's longest: about 150 MB; a clone's conversion
# adds WORLD's). Piper alone once took over 6 GB for one request; the bound of
# 300 MB was set when a request used one worker.
MAX_RSS_GROWTH_MB_PER_WORKER = 200


def max_rss_growth_mb(app: FastAPI) -> float:
    return MAX_RSS_GROWTH_MB_PER_WORKER * app.state.context.pool.size


def _status_kb(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    assert match is not None
    return int(match.group(1))


@contextmanager
def peak_rss_growth_mb() -> Iterator[list[float]]:
    """The process's peak RSS over its RSS at the start, in MB (Linux: VmHWM reset)."""
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    before = _status_kb("VmRSS")
    result: list[float] = []
    yield result
    result.append((_status_kb("VmHWM") - before) / 1024)


async def test_five_thousand_characters_without_punctuation_speak_in_bounded_memory(
    app: FastAPI, client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant
) -> None:
    text = ("hello " * 834)[:5000]
    with peak_rss_growth_mb() as growth:
        response = await speak(client, tenant, text)
    assert response.status_code == 200
    _channels, seconds, _rate = mp3_facts(response.content)
    assert seconds > 100  # all 833 words were spoken, not a truncated part
    assert growth[0] < max_rss_growth_mb(app)
    assert await usage_units(tenants, tenant.org_id) == [("text-to-speech", 5000)]


async def test_a_clone_speaks_a_long_unpunctuated_text_in_bounded_memory(
    app: FastAPI, client: httpx.AsyncClient, tenant: Tenant, tmp_path: Path
) -> None:
    created = await clone(client, tenant, raised_voice_sample(tmp_path))
    voice_id = created.json()["voice"]["id"]
    # Warm the base voice's model up first on a whole chunk per worker, made at once (its
    # runtime keeps an arena per run as large as the largest chunk seen): what is measured
    # is what the text's length adds. The node's bound is one chunk's share per worker.
    workers = app.state.context.pool.size
    assert (await speak(client, tenant, "hello " * 20 * workers, voice_id)).status_code == 200
    # 480 characters, four chunks (twice the warm-up's, two after another on each worker):
    # what is bounded is one chunk's share, whatever the length.
    with peak_rss_growth_mb() as growth:
        response = await speak(client, tenant, "hello " * 80, voice_id)
    assert response.status_code == 200
    assert mp3_facts(response.content)[1] > 18
    assert growth[0] < max_rss_growth_mb(app)


async def test_a_long_clone_sample_is_analysed_in_bounded_memory(
    client: httpx.AsyncClient, tenant: Tenant, tmp_path: Path
) -> None:
    # The speech, then 20 minutes of room silence: a valid 19 MB sample whose whole decode
    # (float32, copied for analysis) once grew the node by over 400 MB.
    speech = clips.english_speech(" ".join(clips.ENGLISH_TEXTS[:2]))
    silence = np.zeros(20 * 60 * speech.sample_rate, dtype=np.int16)
    long_sample = Pcm(np.concatenate([speech.samples, silence]), speech.sample_rate)
    data = clips.write_audio(tmp_path / "long.wav", long_sample, "wav-u8").read_bytes()
    del silence, long_sample
    # Warm the engines' own buffers up first with the same clone (a base voice's arena grows
    # once to the longest sentence it has spoken, and a new clone speaks two to be measured):
    # what is measured is this request's share, which a whole decode would still exceed.
    assert (await clone(client, tenant, data)).status_code == 201
    with peak_rss_growth_mb() as growth:
        response = await clone(client, tenant, data)
    assert response.status_code == 201, response.text
    assert growth[0] < 150


async def test_a_long_transcription_runs_in_bounded_memory(
    client: httpx.AsyncClient, tenants: Tenants, tenant: Tenant, tmp_path: Path
) -> None:
    # Six minutes in 25 kB: Whisper's features of the whole input alone took ~300 MB, and
    # grow with the length (1.6 GB for the 30 minutes the service accepts).
    data = clips.long_silent_ogg_opus(tmp_path / "long.ogg", seconds=360).read_bytes()
    # Warm the model's own buffers up first: what is measured is this request's share.
    short = clips.long_silent_ogg_opus(tmp_path / "short.ogg", seconds=30).read_bytes()
    assert (await transcribe(client, tenant, short, language="en")).status_code == 200
    with peak_rss_growth_mb() as growth:
        response = await transcribe(client, tenant, data, language="en")
    assert response.status_code == 200, response.text
    assert growth[0] < 250
    assert ("speech-to-text", 360) in await usage_units(tenants, tenant.org_id)


@pytest.mark.parametrize(
    "text",
    [
        "\x00",
        "a\x00b",
        "\u0301" * 40,  # combining marks only
        "\U0001f468\u200d" * 40,  # emoji joined by zero-width joiners
        "\ufeff\u200b\u200b",
        "\x1b[31m",
    ],
)
@pytest.mark.parametrize("voice_id", [JOE, GERMAN])
async def test_text_with_little_or_nothing_to_speak_is_valid_audio(
    client: httpx.AsyncClient, tenant: Tenant, text: str, voice_id: str
) -> None:
    response = await speak(client, tenant, text, voice_id)
    assert response.status_code == 200, response.text
    channels, seconds, _rate = mp3_facts(response.content)
    assert channels == 1
    assert seconds > 0


async def test_a_lone_surrogate_is_named_as_invalid_unicode(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    body = b'{"text": "a\\ud800b", "voice_id": "' + JOE.encode() + b'"}'
    response = await client.post(
        "/text-to-speech",
        headers={**tenant.headers, "Content-Type": "application/json"},
        content=body,
    )
    message = assert_error(response, 400, "INVALID_REQUEST")["message"]
    assert "not valid Unicode" in message
    assert "hex escape" not in message


@pytest.fixture
def impatient(settings: Settings) -> Settings:
    """Settings under which any inference is past its deadline after its first step."""
    return settings.model_copy(
        update={"inference_timeout_seconds": 1e-6, "inference_timeout_per_audio_second": 0.0}
    )


async def test_transcription_past_its_deadline_is_502_and_not_billed(
    impatient: Settings, tenants: Tenants, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = clips.write_audio(tmp_path / "a.wav", clips.english_speech(), "wav-s16").read_bytes()
    app = create_app(impatient)
    async with running(app) as client:
        tenant = await tenants.create()
        with caplog.at_level(logging.WARNING, logger="voice_service.inference.pool"):
            response = await transcribe(client, tenant, data, language="en")
        error = assert_error(response, 502, "PROVIDER_ERROR")
        assert "took too long" in error["message"]
        assert "stopped after" in caplog.text  # the worker gave the job up, server-side
        assert slots_held(app.state.context.pool) == 0
    assert await usage_units(tenants, tenant.org_id) == []
    rows = [r.entry for r in await tenants.run(lambda s: recent_requests(s, tenant.org_id, 5))]
    assert [(r.status, r.error_code) for r in rows] == [(502, "PROVIDER_ERROR")]


async def test_speech_past_its_deadline_is_502_and_frees_the_worker(
    impatient: Settings, tenants: Tenants
) -> None:
    app = create_app(impatient.model_copy(update={"pool_size": 1}))
    async with running(app) as client:
        tenant = await tenants.create()
        for _ in range(2):  # the second gets the one worker: the first gave it back
            response = await speak(client, tenant, "One sentence. " * 20)
            assert "took too long" in assert_error(response, 502, "PROVIDER_ERROR")["message"]
            assert slots_held(app.state.context.pool) == 0
    assert await usage_units(tenants, tenant.org_id) == []
