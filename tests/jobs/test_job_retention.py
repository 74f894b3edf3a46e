"""The jobs' sweep (jobs/retention.py) on the suite's backend: results past keeping go with
their audio, audio no job names goes, and a job the queue gave up on is failed, unbilled."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from saq.job import Status
from sqlalchemy import select, update

from tests.helpers.api import assert_error, usage_units
from tests.helpers.app import Tenant, Tenants, make_settings
from tests.helpers.jobs import one_recording, settled, submit, wav_bytes
from voice_service.core.models import BlobChunk, TranscriptionJob, UnitHold, utcnow
from voice_service.jobs.retention import sweep
from voice_service.settings import Settings
from voice_service.web.context import AppContext

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(tmp_path: Path, own_database: str) -> Settings:
    return make_settings(tmp_path, own_database, job_result_days=30)


def context_of(app: FastAPI) -> AppContext:
    context: AppContext = app.state.context
    return context


async def test_results_past_keeping_go_with_their_kept_audio(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants, app: FastAPI
) -> None:
    kept = await submit(client, tenant, wav_bytes(one_recording()), keep_audio="true")
    recent = await submit(client, tenant, wav_bytes(one_recording()))
    for job in (kept, recent):
        assert (await settled(client, tenant, job.json()["id"]))["status"] == "completed"
    old = kept.json()["id"]
    assert (await client.get(f"/transcription-jobs/{old}", headers=tenant.headers)).json()[
        "audio_kept"
    ]
    await tenants.run(
        lambda s: s.execute(
            update(TranscriptionJob)
            .where(TranscriptionJob.id == old)
            .values(finished_at=utcnow() - timedelta(days=31))
        )
    )
    context = context_of(app)
    assert context.jobs is not None
    assert await sweep(context, context.jobs.queue, context.jobs.webhooks) == 1
    assert_error(
        await client.get(f"/transcription-jobs/{old}", headers=tenant.headers), 404, "NOT_FOUND"
    )
    chunks = await tenants.run(lambda s: s.scalars(select(BlobChunk.name).distinct()))
    assert list(chunks) == []  # the kept audio went with it; the other's went at completion
    still = await client.get(f"/transcription-jobs/{recent.json()['id']}", headers=tenant.headers)
    assert still.json()["status"] == "completed"
    assert len(await usage_units(tenants, tenant.org_id)) == 2  # what was billed stays


async def test_audio_no_job_names_goes_once_an_hour_old(
    tmp_path: Path, app: FastAPI, client: httpx.AsyncClient, tenants: Tenants
) -> None:
    context = context_of(app)
    assert context.jobs is not None
    file = tmp_path / "orphan.wav"
    file.write_bytes(wav_bytes(one_recording()))
    await context.blobs.put_file("jobs/job_orphan", file)
    assert (
        await sweep(context, context.jobs.queue, context.jobs.webhooks) == 0
    )  # younger than the grace
    await tenants.run(
        lambda s: s.execute(update(BlobChunk).values(created_at=utcnow() - timedelta(hours=2)))
    )
    assert await sweep(context, context.jobs.queue, context.jobs.webhooks) == 1
    with pytest.raises(LookupError):
        await context.blobs.get_file("jobs/job_orphan", tmp_path / "back.wav")


async def test_a_job_the_queue_gave_up_on_is_failed_and_not_billed(
    client: httpx.AsyncClient, tenant: Tenant, tenants: Tenants, app: FastAPI
) -> None:
    context = context_of(app)
    assert context.jobs is not None
    await context.jobs.stop()  # nothing runs it
    capped = await tenants.add_key(tenant, monthly_units=10_000)
    job_id = (await submit(client, capped, wav_bytes(one_recording()))).json()["id"]
    queued = await context.jobs.queue.job(job_id)
    assert queued is not None
    await context.jobs.queue.finish(queued, Status.ABORTED, error="swept")
    assert await sweep(context, context.jobs.queue, context.jobs.webhooks) == 1
    failed = (await client.get(f"/transcription-jobs/{job_id}", headers=tenant.headers)).json()
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "INTERNAL_ERROR"
    assert failed["audio_kept"] is False
    assert await usage_units(tenants, tenant.org_id) == []
    assert list(await tenants.run(lambda s: s.scalars(select(UnitHold)))) == []
