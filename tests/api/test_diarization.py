"""diarize=true on /speech-to-text and /asr: real people's voices come back as their own
speakers, at the right times, with the hints honoured and bad hints refused."""

from __future__ import annotations

import asyncio
import io
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi import FastAPI

from tests.helpers.api import assert_error, usage_units
from tests.helpers.app import Tenant, Tenants, make_settings, running
from tests.helpers.speakers import (
    CALLER,
    COLLAR,
    COMMANDS,
    PAUSE,
    READER,
    conversation,
    diarizer_runs,
    who_said,
)
from voice_service.app import create_app
from voice_service.audio.decode import DecodedAudio
from voice_service.audio.encode import wav_of
from voice_service.engines.speaker_embedding import SAMPLE_RATE
from voice_service.inference.engines import Engines, load_diarizer
from voice_service.transcription import service

pytestmark = pytest.mark.anyio

TWO = [(READER, 0), (CALLER, 4), (READER, 2), (CALLER, 1)]
THREE = [(READER, 0), (CALLER, 4), (COMMANDS, 1), (READER, 2), (COMMANDS, 2), (CALLER, 1)]


async def diarized(
    client: httpx.AsyncClient,
    tenant: Tenant,
    audio: bytes,
    endpoint: str = "/speech-to-text",
    **fields: str,
) -> httpx.Response:
    """The audio posted with diarize=true and language=en, unless `fields` say otherwise."""
    return await client.post(
        endpoint,
        headers=tenant.headers,
        files={"file": ("talk.wav", io.BytesIO(audio), "audio/wav")},
        data={"language": "en", "diarize": "true", **fields},
    )


async def test_two_people_come_back_as_two_speakers_each_word_labelled(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    audio, truth = conversation(TWO)
    response = await diarized(client, tenant, audio, timestamps="word")
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"text", "language", "request_id", "segments"}
    names = who_said(body["segments"], truth)
    assert sorted(names) == ["speaker_0", "speaker_1"]
    assert names["speaker_0"] == READER  # numbered by first speech
    for segment in body["segments"]:
        assert segment["words"], segment
        assert {word["speaker"] for word in segment["words"]} == {segment["speaker"]}
    spoken = " ".join(segment["text"] for segment in body["segments"])
    assert spoken.split() == body["text"].split()


async def test_diarized_text_is_the_plain_text_word_for_word(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    """Where a change of speaker splits a decoded segment, the words keep their spaces: the
    text, and the segments read in order, are the transcript without speakers. The turns
    follow each other without a pause, so that Whisper decodes a change of speaker inside a
    segment (where it cuts its segments differs from one CPU to another: after a pause of
    0.15 s, one CPU kept every change at a segment's edge)."""
    audio, _ = conversation(TWO, pause=0.0)
    plain = await diarized(client, tenant, audio, diarize="false", timestamps="word")
    told = await diarized(client, tenant, audio, timestamps="word")
    assert plain.status_code == told.status_code == 200, (plain.text, told.text)
    words = plain.json()["text"].split()
    segments = told.json()["segments"]
    assert len(segments) > len(plain.json()["segments"])  # a segment was split
    assert told.json()["text"].split() == words
    assert " ".join(segment["text"] for segment in segments).split() == words


async def test_three_people_come_back_as_three_speakers(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    audio, truth = conversation(THREE)
    response = await diarized(client, tenant, audio)
    assert response.status_code == 200, response.text
    segments = response.json()["segments"]
    assert sorted(who_said(segments, truth)) == ["speaker_0", "speaker_1", "speaker_2"]
    assert all("words" not in segment for segment in segments)  # not asked for


async def test_num_speakers_is_honoured(client: httpx.AsyncClient, tenant: Tenant) -> None:
    audio, _ = conversation(THREE)
    response = await diarized(client, tenant, audio, num_speakers="2")
    assert response.status_code == 200, response.text
    assert {segment["speaker"] for segment in response.json()["segments"]} == {
        "speaker_0",
        "speaker_1",
    }


async def test_one_person_is_one_speaker(client: httpx.AsyncClient, tenant: Tenant) -> None:
    audio, _ = conversation([(READER, 0), (READER, 1), (READER, 2)])
    response = await diarized(client, tenant, audio)
    assert response.status_code == 200, response.text
    segments = response.json()["segments"]
    assert segments and {segment["speaker"] for segment in segments} == {"speaker_0"}


async def test_silence_has_no_speakers(client: httpx.AsyncClient, tenant: Tenant) -> None:
    silence = wav_of(np.zeros(3 * SAMPLE_RATE, dtype=np.float32), SAMPLE_RATE)
    response = await diarized(client, tenant, silence)
    assert response.status_code == 200, response.text
    assert response.json()["segments"] == []


async def test_diarization_bills_the_same_seconds(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants
) -> None:
    audio, truth = conversation(TWO)
    response = await diarized(client, tenant, audio)
    assert response.status_code == 200, response.text
    seconds = truth[-1][2] + PAUSE
    assert await usage_units(tenants, tenant.org_id) == [("speech-to-text", math.ceil(seconds))]


async def test_the_upload_is_decoded_once_for_the_words_and_the_speakers(
    client: httpx.AsyncClient, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[Path] = []
    decode = service.decode_audio

    def counted(path: Path, **options: Any) -> DecodedAudio:
        decoded.append(path)
        return decode(path, **options)

    monkeypatch.setattr(service, "decode_audio", counted)
    audio, truth = conversation(TWO)
    response = await diarized(client, tenant, audio)
    assert response.status_code == 200, response.text
    assert sorted(who_said(response.json()["segments"], truth)) == ["speaker_0", "speaker_1"]
    assert len(decoded) == 1


async def test_a_request_over_its_cap_never_starts_telling_speakers_apart(
    app: FastAPI, client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants
) -> None:
    audio, _ = conversation(TWO)
    capped = await tenants.add_key(tenant, monthly_units=2)
    before = diarizer_runs(app)
    assert_error(await diarized(client, capped, audio), 429, "RATE_LIMITED")
    pool = app.state.context.pool
    async with asyncio.timeout(60):  # whatever the refused request started has ended
        while any(q["waiting"] or q["running"] for q in pool.queues().values()):  # noqa: ASYNC110 (the pool's own time)
            await asyncio.sleep(0.05)
    assert diarizer_runs(app) == before
    # The count is the diarizer's runs: one request within its cap is one more.
    assert (await diarized(client, tenant, audio)).status_code == 200
    assert diarizer_runs(app) == before + 1


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"num_speakers": "0"}, "num_speakers"),
        ({"num_speakers": "1000"}, "num_speakers"),
        ({"max_speakers": "two"}, "max_speakers"),
        ({"min_speakers": "3", "max_speakers": "2"}, "min_speakers"),
        ({"num_speakers": "2", "max_speakers": "3"}, "num_speakers"),
        ({"diarize": "maybe"}, "diarize"),
        # Python's int() takes these; a count is plain ASCII digits
        ({"num_speakers": " 2"}, "num_speakers"),
        ({"num_speakers": "\u0662"}, "num_speakers"),  # Arabic-Indic two
        ({"num_speakers": "1_0"}, "num_speakers"),
        ({"max_speakers": "+3"}, "max_speakers"),
        ({"diarize": "false", "num_speakers": "2"}, "num_speakers"),
    ],
)
async def test_bad_speaker_hints_are_400s(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants, fields: dict[str, str], param: str
) -> None:
    audio, _ = conversation([(CALLER, 0)])
    response = await diarized(client, tenant, audio, "/asr", **fields)
    assert assert_error(response, 400, "INVALID_REQUEST")["message"].startswith(param)
    assert await usage_units(tenants, tenant.org_id) == []


async def test_timestamps_alone_give_segments_without_speakers(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    audio, truth = conversation([(READER, 0)])
    response = await diarized(client, tenant, audio, diarize="false", timestamps="word")
    assert response.status_code == 200, response.text
    segments = response.json()["segments"]
    assert segments
    for segment in segments:
        assert set(segment) == {"start", "end", "text", "words"}
        assert all(set(word) == {"word", "start", "end"} for word in segment["words"])
        assert 0 <= segment["start"] < segment["end"] <= truth[0][2] + COLLAR


async def test_with_a_speaker_model_three_people_come_back_as_three_speakers(
    tmp_path: Path, database_url: str, engines: Engines, campp_file: Path
) -> None:
    settings = make_settings(tmp_path, database_url, speaker_model=campp_file)
    with_model = replace(engines, diarizer=load_diarizer(settings))
    assert with_model.diarizer is not None and with_model.diarizer.encoder.startswith("onnx:")
    audio, truth = conversation(THREE)
    async with running(create_app(settings, with_model)) as client:
        tenant = await Tenants(settings).create()
        response = await diarized(client, tenant, audio, timestamps="word")
    assert response.status_code == 200, response.text
    segments = response.json()["segments"]
    assert sorted(who_said(segments, truth)) == ["speaker_0", "speaker_1", "speaker_2"]
    for segment in segments:
        assert {word["speaker"] for word in segment["words"]} == {segment["speaker"]}
