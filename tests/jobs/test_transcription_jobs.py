"""/transcription-jobs over HTTP with real recordings: a job's transcript is the sync
endpoint's transcript of each of its pieces, billed once when it completes, and every way a
job can end leaves the books right."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import pytest
from bench.wer import words
from saq.job import Status
from sqlalchemy import select

from tests.helpers.api import assert_error, usage_units
from tests.helpers.app import Tenant, Tenants, postgres_row_locked, running
from tests.helpers.jobs import conversation, one_recording, settled, submit, wav_bytes
from voice_service.app import create_app
from voice_service.audio.pieces import PieceCutter
from voice_service.audio.vad import RATE
from voice_service.core.models import RequestLogEntry, TranscriptionJob, UnitHold
from voice_service.inference.engines import Engines
from voice_service.settings import Settings

pytestmark = pytest.mark.anyio

ENDED = (Status.ABORTED, Status.COMPLETE, Status.FAILED)  # a queue entry no worker runs


async def test_a_job_is_the_sync_transcript_of_each_of_its_pieces(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants
) -> None:
    await transcribed_as_its_pieces(client, tenant, tenants, conversation())


async def transcribed_as_its_pieces(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants, audio: npt.NDArray[np.float32]
) -> None:
    """The job's transcript of `audio` is the sync transcript of each of its pieces, and it
    is billed once, under its POST, whose log row names it."""
    response = await submit(client, tenant, wav_bytes(audio), language="en")
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["status"] == "queued"
    assert response.headers["location"] == f"/api/v1/transcription-jobs/{job['id']}"
    assert job["duration_seconds"] == pytest.approx(audio.size / RATE)
    done = await settled(client, tenant, job["id"])
    assert done["status"] == "completed", done
    assert done["progress_seconds"] == pytest.approx(audio.size / RATE)
    assert done["units"] == -(-audio.size // RATE)
    assert done["audio_kept"] is False

    # Billed once, under the POST's request id, whose row names the job.
    assert await usage_units(tenants, tenant.org_id) == [("speech-to-text", done["units"])]
    row = await tenants.run(
        lambda s: s.scalar(
            select(RequestLogEntry).where(RequestLogEntry.request_id == done["request_id"])
        )
    )
    assert row is not None
    assert (row.status, row.resource_id) == (202, job["id"])

    # The same pieces, each sent to the sync endpoint, give the same words.
    cutter = PieceCutter()
    pieces = [*cutter.add(audio), *cutter.finish()]
    expected: list[str] = []
    for piece in pieces:
        if not piece.speech:
            continue
        sync = await client.post(
            "http://testserver/v1/audio/transcriptions",
            headers=tenant.headers,
            files={"file": ("piece.wav", wav_bytes(piece.samples), "audio/wav")},
            data={"model": "whisper-1", "language": "en", "response_format": "verbose_json"},
        )
        assert sync.status_code == 200, sync.text
        expected.extend(words(sync.json()["text"]))
    assert words(done["result"]["text"]) == expected
    segments = done["result"]["segments"]
    assert [s["start"] for s in segments] == sorted(s["start"] for s in segments)
    assert segments[-1]["end"] <= audio.size / RATE + 0.5


async def test_formats_list_and_delete(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants
) -> None:
    first = (await submit(client, tenant, wav_bytes(one_recording()))).json()
    second = (await submit(client, tenant, wav_bytes(one_recording()), timestamps="word")).json()
    units = []
    for job in (first, second):
        done = await settled(client, tenant, job["id"])
        assert done["status"] == "completed"
        units.append(("speech-to-text", done["units"]))

    url = f"/transcription-jobs/{second['id']}"
    done = (await client.get(url, headers=tenant.headers)).json()
    assert all(segment["words"] for segment in done["result"]["segments"])
    srt = await client.get(url, params={"format": "srt"}, headers=tenant.headers)
    assert srt.headers["content-type"].startswith("application/x-subrip")
    assert re.match(r"1\n00:00:\d\d,\d{3} --> 00:00:\d\d,\d{3}\n\S", srt.text)
    vtt = await client.get(url, params={"format": "vtt"}, headers=tenant.headers)
    assert vtt.text.startswith("WEBVTT\n\n00:00:")
    text = await client.get(url, params={"format": "text"}, headers=tenant.headers)
    assert words(text.text) == words(done["result"]["text"])

    listed = await client.get("/transcription-jobs", params={"limit": 1}, headers=tenant.headers)
    page = listed.json()
    assert [job["id"] for job in page["jobs"]] == [second["id"]]
    assert page["jobs"][0]["result"] is None  # lists stay light
    older = await client.get(
        "/transcription-jobs", params={"before": page["next"]}, headers=tenant.headers
    )
    assert [job["id"] for job in older.json()["jobs"]] == [first["id"]]
    assert older.json()["next"] is None

    # Another organization sees none of it.
    other = await tenants.create()
    assert_error(await client.get(url, headers=other.headers), 404, "NOT_FOUND")
    assert_error(await client.delete(url, headers=other.headers), 404, "NOT_FOUND")
    assert (await client.get("/transcription-jobs", headers=other.headers)).json()["jobs"] == []

    deleted = await client.delete(url, headers=tenant.headers)
    assert deleted.status_code == 204
    assert_error(await client.get(url, headers=tenant.headers), 404, "NOT_FOUND")
    # Billed once each, and deleting a job does not unbill it.
    assert await usage_units(tenants, tenant.org_id) == units


async def test_what_is_not_audio_is_refused_at_submission(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants
) -> None:
    refused = await submit(client, tenant, b"RIFF" + b"\0" * 4000)
    assert_error(refused, 415, "UNSUPPORTED_MEDIA_TYPE")
    not_multipart = await client.post("/transcription-jobs", headers=tenant.headers, content=b"{}")
    assert_error(not_multipart, 400, "INVALID_REQUEST")
    two_files = await client.post(
        "/transcription-jobs",
        headers=tenant.headers,
        files=[("file", ("a.wav", b"1", "audio/wav")), ("file", ("b.wav", b"2", "audio/wav"))],
    )
    assert_error(two_files, 400, "INVALID_REQUEST")
    wrong = await submit(client, tenant, wav_bytes(one_recording()), timestamps="char")
    assert_error(wrong, 400, "INVALID_REQUEST")
    assert (await client.get("/transcription-jobs", headers=tenant.headers)).json()["jobs"] == []
    assert await usage_units(tenants, tenant.org_id) == []


async def test_an_upload_past_the_job_limit_is_413_and_the_sync_limit_is_unchanged(
    settings: Settings, engines: Engines
) -> None:
    limited = settings.model_copy(
        update={"job_max_upload_bytes": 200_000, "max_upload_bytes": 100_000}
    )
    tenant = await Tenants(limited).create()
    async with running(create_app(limited, engines)) as client:
        # Past the body's cap (the file's, and room for the form), and past the file's.
        for seconds in (12, 6.5):
            big = wav_bytes(np.zeros(round(RATE * seconds), dtype=np.float32))
            assert_error(await submit(client, tenant, big), 413, "PAYLOAD_TOO_LARGE")
        middle = wav_bytes(np.zeros(RATE * 5, dtype=np.float32))  # 160 kB
        accepted = await submit(client, tenant, middle)
        assert accepted.status_code == 202, accepted.text
        sync = await client.post(
            "/speech-to-text",
            headers=tenant.headers,
            files={"file": ("a.wav", middle, "audio/wav")},
        )
        assert_error(sync, 413, "PAYLOAD_TOO_LARGE")
        done = await settled(client, tenant, accepted.json()["id"])
        assert done["status"] == "completed"
        assert done["result"]["text"] == ""  # only silence: no speech, no invented words


async def test_cancel_bills_nothing_and_frees_the_held_units(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants, app: Any
) -> None:
    capped = await tenants.add_key(tenant, monthly_units=10_000)
    # No worker takes it: the job waits, queued.
    await app.state.context.jobs.stop()
    accepted = await submit(client, capped, wav_bytes(one_recording()))
    job = accepted.json()
    units = -(-int(job["duration_seconds"] * 1000) // 1000)
    holds = await tenants.run(lambda s: s.scalars(select(UnitHold)))
    assert [h.units for h in holds] == [units]
    # Held through the request's ledger, as every request holds units: the answer says what
    # the cap leaves once the job is billed.
    assert accepted.headers["X-Units-Remaining"] == str(10_000 - units)
    cancelled = await client.delete(f"/transcription-jobs/{job['id']}", headers=tenant.headers)
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    assert cancelled.json()["audio_kept"] is False
    assert list(await tenants.run(lambda s: s.scalars(select(UnitHold)))) == []
    assert await usage_units(tenants, tenant.org_id) == []
    # A cancelled job is ended: deleting it again removes it.
    gone = await client.delete(f"/transcription-jobs/{job['id']}", headers=tenant.headers)
    assert gone.status_code == 204


async def test_concurrent_deletes_of_a_job_under_way_cancel_it_and_keep_it(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants, app: Any
) -> None:
    capped = await tenants.add_key(tenant, monthly_units=10_000)
    await app.state.context.jobs.stop()  # no worker takes it: it stays under way, queued
    job = (await submit(client, capped, wav_bytes(one_recording()))).json()
    url = f"/transcription-jobs/{job['id']}"
    deletes = asyncio.gather(*(client.delete(url, headers=tenant.headers) for _ in "abc"))
    database = app.state.context.settings.resolved_database_url
    if not database.startswith("postgresql"):
        # SQLite gives the test no way to hold the three at their cancel: one may read the
        # job after another cancelled it, and delete it as an ended job. Only what holds in
        # every order is checked here; the order itself is PostgreSQL's, below.
        answers = await deletes
        for answer in answers:
            assert answer.status_code in (200, 204), answer.text
            assert answer.status_code == 204 or answer.json()["status"] == "cancelled"
        left = await tenants.run(lambda s: s.get(TranscriptionJob, job["id"]))
        assert left is None or (left.status, left.units) == ("cancelled", None)
        assert list(await tenants.run(lambda s: s.scalars(select(UnitHold)))) == []
        assert await usage_units(tenants, tenant.org_id) == []
        return
    # Each DELETE has found the job under way once all three wait at their cancel's UPDATE
    # for the row this test holds: none can have read it ended.
    async with postgres_row_locked(database, "transcription_jobs", job["id"]) as waiting:
        asked = asyncio.ensure_future(deletes)
        await waiting(3)
    answers = await asked
    # Each asked while it was under way: one cancelled it, and each answers it cancelled.
    assert [answer.status_code for answer in answers] == [200, 200, 200], answers
    assert [answer.json()["status"] for answer in answers] == ["cancelled"] * 3
    kept = await tenants.run(lambda s: s.get(TranscriptionJob, job["id"]))
    assert kept is not None
    assert (kept.status, kept.units, kept.result) == ("cancelled", None, None)
    assert list(await tenants.run(lambda s: s.scalars(select(UnitHold)))) == []
    assert await usage_units(tenants, tenant.org_id) == []
    # Once it has ended, a DELETE deletes it.
    assert (await client.delete(url, headers=tenant.headers)).status_code == 204
    assert await tenants.run(lambda s: s.get(TranscriptionJob, job["id"])) is None


async def test_a_job_cancelled_while_it_runs_stops_billed_nothing(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants, app: Any
) -> None:
    job = (await submit(client, tenant, wav_bytes(conversation(rounds=2)), language="en")).json()
    url = f"/transcription-jobs/{job['id']}"

    async def shown() -> dict[str, Any]:
        answer: dict[str, Any] = (await client.get(url, headers=tenant.headers)).json()
        return answer

    async with asyncio.timeout(300):
        while (await shown())["progress_seconds"] == 0:  # noqa: ASYNC110 (the node's own time)
            await asyncio.sleep(0.2)
    cancelled = await client.delete(url, headers=tenant.headers)
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"  # it was processing
    queue = app.state.context.jobs.queue
    async with asyncio.timeout(300):  # its worker stops at the next piece
        while (await queue.job(job["id"])).status not in ENDED:  # noqa: ASYNC110
            await asyncio.sleep(0.2)
    ended = (await client.get(url, headers=tenant.headers)).json()
    assert (ended["status"], ended["units"], ended["result"]) == ("cancelled", None, None)
    assert ended["progress_seconds"] < ended["duration_seconds"]
    assert await usage_units(tenants, tenant.org_id) == []


async def test_a_cap_refuses_a_job_its_units_would_pass(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants
) -> None:
    capped = await tenants.add_key(tenant, monthly_units=5)
    refused = await submit(client, capped, wav_bytes(one_recording()))
    assert_error(refused, 429, "RATE_LIMITED")
    assert (await client.get("/transcription-jobs", headers=tenant.headers)).json()["jobs"] == []


async def test_an_idempotency_key_answers_the_same_job(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    audio = wav_bytes(one_recording())
    headers = {"Idempotency-Key": "meeting-2026-11-25"}
    first = await submit(client, tenant, audio, headers=headers)
    again = await submit(client, tenant, audio, headers=headers)
    assert first.status_code == again.status_code == 202
    assert again.json()["id"] == first.json()["id"]
    assert again.headers["idempotent-replayed"] == "true"
    other_field = await submit(client, tenant, audio, headers=headers, language="fr")
    assert_error(other_field, 400, "INVALID_REQUEST")  # another request, the same key
    other_audio = await submit(client, tenant, audio[:-2] + b"\x01\x00", headers=headers)
    assert_error(other_audio, 400, "INVALID_REQUEST")
    listed = (await client.get("/transcription-jobs", headers=tenant.headers)).json()["jobs"]
    assert len(listed) == 1
    await settled(client, tenant, first.json()["id"])


async def test_a_key_without_the_scope_is_refused(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants
) -> None:
    from voice_service.core.vocabulary import Scope

    tts_only = await tenants.add_key(tenant, scopes=[Scope.TEXT_TO_SPEECH])
    audio = wav_bytes(one_recording())
    assert_error(await submit(client, tts_only, audio), 403, "SERVICE_DISABLED")
    asr_only = await tenants.add_key(tenant, scopes=[Scope.ASR])
    assert_error(await submit(client, asr_only, audio), 403, "SERVICE_DISABLED")
    job = await submit(client, asr_only, audio, billed_as="asr")
    assert job.status_code == 202, job.text
    done = await settled(client, asr_only, job.json()["id"])
    assert done["billed_as"] == "asr"
    listed = await client.get("/transcription-jobs", headers=tts_only.headers)
    assert_error(listed, 403, "SERVICE_DISABLED")
