"""A job's place in the queue, and what ends it early: cancelling one, deleting one, its
audio let go (submitting one is `jobs.submission`)."""

from __future__ import annotations

import logging
from datetime import timedelta

from saq.job import Job as QueuedJob

from voice_service.core.models import TranscriptionJob
from voice_service.core.vocabulary import JobStatus
from voice_service.jobs import repository
from voice_service.jobs.reading import job_of
from voice_service.kit.db import transaction
from voice_service.kit.job_queue import SqlQueue
from voice_service.runtime import Runtime
from voice_service.tenancy.audit import Action, Actor

logger = logging.getLogger(__name__)

QUEUE_NAME = "transcription-jobs"
RUN = "transcribe"  # the queue's function name for a job
AUDIO_PREFIX = "jobs/"
# A job's units stay held until it ends, however long it waits; a hold a lost job left
# stops counting after this.
HOLD_LIFETIME = timedelta(days=7)
# How often a job is tried (its node killed, the database away) before it fails.
ATTEMPTS = 3


def queued_job(job_id: str, lease_seconds: int) -> QueuedJob:
    """The queue's entry for a job: keyed by its id, so it is queued once."""
    return QueuedJob(
        function=RUN,
        kwargs={"job_id": job_id},
        key=job_id,
        timeout=0,  # as long as it takes; a dead worker is found by its heartbeat
        heartbeat=lease_seconds,
        retries=ATTEMPTS,
        retry_delay=5.0,
        retry_backoff=True,
        ttl=3600,
    )


async def cancel_job(
    runtime: Runtime, queue: SqlQueue, org_id: str, job_id: str, *, actor: Actor | None = None
) -> TranscriptionJob | None:
    """Cancel the organization's job if it is under way (kept, cancelled, billed nothing)
    and answer it; None, and nothing done, if it has ended. `actor`: the console user who
    asked, recorded with the cancel."""
    job = await job_of(runtime, org_id, job_id)
    return await _cancel(runtime, queue, job, actor)


async def cancel_or_delete(
    runtime: Runtime, queue: SqlQueue, org_id: str, job_id: str
) -> TranscriptionJob | None:
    """What DELETE does to the organization's job as the request finds it: cancel it if it
    is under way (kept, cancelled, billed nothing) and answer it, or delete it, with its
    audio and transcript, if it has ended (None).

    A job found under way that ended meanwhile (another DELETE cancelled it, or it
    completed) is answered as it is now and kept: the caller asked while it ran, and
    deleting it would lose what the caller never saw. None too if another request
    deleted it since (after finding it ended)."""
    job = await job_of(runtime, org_id, job_id)
    if not JobStatus(job.status).ended:
        cancelled = await _cancel(runtime, queue, job, None)
        if cancelled is not None:
            return cancelled
        async with runtime.sessions() as session:
            return await repository.job_by_id(session, job.id)
    async with transaction(runtime.sessions) as session:
        await repository.delete_job(session, job.id)
    await drop_audio(runtime, job)
    return None


async def _cancel(
    runtime: Runtime, queue: SqlQueue, job: TranscriptionJob, actor: Actor | None
) -> TranscriptionJob | None:
    """Cancel a job under way: kept, cancelled, billed nothing; None if it has ended."""
    async with transaction(runtime.sessions) as session:
        if not await repository.cancel(session, job, runtime.books.clock()):
            return None
        if actor is not None:
            actor.record(session, Action.JOB_CANCELLED, f"{job.id} in {job.org_id}")
    queued = await queue.job(job.id)
    if queued is not None:  # a worker running it stops at its next piece
        await queue.abort(queued, "cancelled")
    await audio_let_go(runtime, job)
    async with runtime.sessions() as session:
        return await repository.job_by_id(session, job.id)


async def audio_let_go(runtime: Runtime, job: TranscriptionJob) -> None:
    """Delete the audio of a job that has just ended, unless it asked to keep it."""
    if not job.keep_audio:
        await drop_audio(runtime, job)


async def drop_audio(runtime: Runtime, job: TranscriptionJob) -> None:
    """Delete the audio a job no longer names (its row ended or gone); should the store
    fail, the sweep removes it later, as audio no job names."""
    if job.audio is None:
        return
    try:
        await runtime.blobs.drop_file(job.audio)
    except Exception as exc:
        logger.warning("audio of job %s left for the sweep: %r", job.id, exc)
