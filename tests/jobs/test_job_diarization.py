"""diarize on transcription jobs: a recording long enough to be cut into pieces names each
real person alike in every piece (the speakers are told apart over the whole recording, not
piece by piece), in the job's JSON and captions, billed as the same seconds."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from tests.helpers.api import assert_error, usage_units
from tests.helpers.app import Tenant, Tenants, make_settings, running
from tests.helpers.jobs import one_recording, settled, submit, wav_bytes
from tests.helpers.speakers import (
    CALLER,
    COMMANDS,
    READER,
    conversation,
    data_url,
    diarizer_runs,
    reference,
    spoken,
    who_said,
)
from voice_service.app import create_app
from voice_service.audio.pieces import PieceCutter
from voice_service.audio.vad import RATE
from voice_service.inference.engines import Engines, load_diarizer

pytestmark = pytest.mark.anyio

# Each person speaks in turn four times, with pauses long enough to cut pieces at.
ROUNDS = [
    (person, index)
    for round_ in ((0, 4, 1), (2, 1, 0), (3, 2, 2), (4, 3, 3))
    for person, index in zip((READER, CALLER, COMMANDS), round_, strict=True)
]
PIECE_PAUSE = 1.2


async def test_each_person_is_named_alike_in_every_piece_of_a_job(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants
) -> None:
    samples, truth = spoken(ROUNDS, PIECE_PAUSE)
    cutter = PieceCutter()
    pieces = [piece for piece in [*cutter.add(samples), *cutter.finish()] if piece.speech]
    assert len(pieces) >= 3  # so labels made piece by piece would not agree

    response = await submit(
        client, tenant, wav_bytes(samples), language="en", diarize="true", timestamps="word"
    )
    assert response.status_code == 202, response.text
    assert response.json()["diarize"] is True
    done = await settled(client, tenant, response.json()["id"])
    assert done["status"] == "completed", done
    segments = done["result"]["segments"]
    names = who_said(segments, truth)
    assert sorted(names) == ["speaker_0", "speaker_1", "speaker_2"]
    assert names["speaker_0"] == READER  # numbered by first speech
    for segment in segments:
        assert {word["speaker"] for word in segment["words"]} == {segment["speaker"]}

    # The same seconds as without diarize, billed once.
    assert done["units"] == -(-samples.size // RATE)
    assert await usage_units(tenants, tenant.org_id) == [("speech-to-text", done["units"])]

    url = f"/transcription-jobs/{done['id']}"
    srt = (await client.get(url, params={"format": "srt"}, headers=tenant.headers)).text
    said = re.findall(r"\d\d,\d{3}\n\[(speaker_\d)\] \S", srt)
    assert said == [segment["speaker"] for segment in segments]
    vtt = (await client.get(url, params={"format": "vtt"}, headers=tenant.headers)).text
    voices = re.findall(r"\d\d\.\d{3}\n<v (speaker_\d)>[^<\n]+</v>\n", vtt)
    assert voices == [segment["speaker"] for segment in segments]


async def test_a_job_honours_its_hints_and_leaves_words_out_unless_asked(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    audio, truth = conversation(ROUNDS[:6])
    response = await submit(
        client,
        tenant,
        audio,
        language="en",
        diarize="true",
        num_speakers="3",
        known_speaker_names="Bob",
        known_speaker_references=data_url(reference(CALLER, 0, 2, 3)),
    )
    assert response.status_code == 202, response.text
    assert response.json()["num_speakers"] == 3
    assert response.json()["known_speaker_names"] == ["Bob"]
    done = await settled(client, tenant, response.json()["id"])
    assert done["status"] == "completed", done
    segments = done["result"]["segments"]
    names = who_said(segments, truth)
    assert names == {"speaker_0": READER, "Bob": CALLER, "speaker_2": COMMANDS}
    assert all(segment["words"] is None for segment in segments)  # not asked for


async def test_bad_speaker_hints_are_refused_at_submission(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants
) -> None:
    audio, _ = conversation(ROUNDS[:2])
    for fields, param in (
        ({"diarize": "true", "min_speakers": "3", "max_speakers": "2"}, "min_speakers"),
        ({"diarize": "true", "num_speakers": "33"}, "num_speakers"),
        ({"num_speakers": "2"}, "num_speakers"),
        ({"diarize": "yes"}, "diarize"),
    ):
        response = await submit(client, tenant, audio, **fields)
        assert assert_error(response, 400, "INVALID_REQUEST")["message"].startswith(param)
    # The same rules for a job by URL, before anything is fetched (a loopback URL, which
    # would be refused were it fetched).
    for body, param in (
        ({"diarize": True, "num_speakers": 0}, "num_speakers"),
        ({"max_speakers": 2}, "max_speakers"),
    ):
        response = await client.post(
            "/transcription-jobs",
            headers=tenant.headers,
            json={"url": "https://127.0.0.1:9/meeting.mp3", **body},
        )
        assert assert_error(response, 400, "INVALID_REQUEST")["message"].startswith(param)
    assert await usage_units(tenants, tenant.org_id) == []


async def test_a_job_sent_again_with_its_key_hears_its_people_once(
    tmp_path: Path, own_database: str, engines: Engines
) -> None:
    # No job runs on this node: the diarizer runs only to hear the people a job names. Its
    # database is its own, as every job test's is: on the session's, the job it leaves
    # queued was taken up by the next test's node on this process.
    settings = make_settings(tmp_path, own_database, job_workers=0)
    app = create_app(settings, engines)
    async with running(app) as client:
        tenant = await Tenants(settings).create()
        named = {
            "diarize": "true",
            "known_speaker_names": "Bob",
            "known_speaker_references": data_url(reference(CALLER, 0, 2, 3)),
        }
        headers = {"Idempotency-Key": "support-call-42"}
        audio = wav_bytes(one_recording())
        first = await submit(client, tenant, audio, headers=headers, **named)
        assert first.status_code == 202, first.text
        heard = diarizer_runs(app)
        assert heard >= 1
        again = await submit(client, tenant, audio, headers=headers, **named)
        assert again.status_code == 202 and again.headers["idempotent-replayed"] == "true"
        assert again.json()["id"] == first.json()["id"]
        assert diarizer_runs(app) == heard


async def test_a_job_whose_people_another_speaker_model_heard_fails_unbilled(
    tmp_path: Path, own_database: str, engines: Engines, campp_file: Path
) -> None:
    # The job is taken on a node with the packaged d-vectors, which hears its people; the
    # node that runs it has VOICE_SERVICE_SPEAKER_MODEL set, whose vectors are not d-vectors.
    taking = make_settings(tmp_path / "taking", own_database, job_workers=0)
    running_settings = make_settings(tmp_path / "running", own_database, speaker_model=campp_file)
    with_model = replace(engines, diarizer=load_diarizer(running_settings))
    audio, truth = conversation([(READER, 0), (CALLER, 4), (READER, 2), (CALLER, 1)])
    named = {
        "language": "en",
        "diarize": "true",
        "known_speaker_names": "Bob",
        "known_speaker_references": data_url(reference(CALLER, 0, 2, 3)),
    }
    async with running(create_app(taking, engines)) as client:
        tenant = await Tenants(taking).create()
        taken = await submit(client, tenant, audio, **named)
        assert taken.status_code == 202, taken.text

    async with running(create_app(running_settings, with_model)) as client:
        done = await settled(client, tenant, taken.json()["id"])
        assert done["status"] == "failed", done
        assert "another speaker model" in done["error"]["message"]
        assert await usage_units(Tenants(taking), tenant.org_id) == []

        # Taken and run with the same model, the job names its people.
        again = await submit(client, tenant, audio, **named)
        done = await settled(client, tenant, again.json()["id"])
        assert done["status"] == "completed", done
        assert who_said(done["result"]["segments"], truth) == {"Bob": CALLER, "speaker_0": READER}
