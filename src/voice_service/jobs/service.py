"""What a customer does with jobs: submit one (its audio measured, kept, its units held, and
the job queued in one transaction), cancel one, delete one."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextlib import aclosing
from dataclasses import dataclass
from datetime import timedelta
from fractions import Fraction
from pathlib import Path

from saq.job import Job as QueuedJob

from voice_service.audio.decode import measuring
from voice_service.audio.formats import AcceptedAudio, identify_audio
from voice_service.audio.policy import NATIVE_POLICY, audio_errors_as_api_errors
from voice_service.books.ledger import Ledger
from voice_service.books.usage.caps import drop_hold, hold_units
from voice_service.core.ids import new_id
from voice_service.core.models import TranscriptionJob
from voice_service.core.vocabulary import Capability, JobStatus, UsageEndpoint
from voice_service.engines.catalog import DECODER
from voice_service.engines.diarization import SpeakerHints
from voice_service.inference.admission import Job
from voice_service.jobs import repository
from voice_service.kit.db import transaction
from voice_service.kit.job_queue import SqlQueue
from voice_service.runtime import Runtime
from voice_service.transcription.service import billed_seconds

logger = logging.getLogger(__name__)

QUEUE_NAME = "transcription-jobs"
RUN = "transcribe"  # the queue's function name for a job
AUDIO_PREFIX = "jobs/"
# A job's units stay held until it ends, however long it waits; a hold a lost job left
# stops counting after this.
HOLD_LIFETIME = timedelta(days=7)
# How often a job is tried (its node killed, the database away) before it fails.
ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class JobOptions:
    language: str | None  # None: detected from the first speech
    word_timestamps: bool
    speakers: SpeakerHints | None  # told apart, with these hints; None: not asked
    keep_audio: bool
    endpoint: UsageEndpoint  # what its usage is billed under
    webhook_url: str | None  # told when it ends, besides the organization's webhooks


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


async def submit_job(
    runtime: Runtime,
    queue: SqlQueue,
    ledger: Ledger,
    audio: Path,
    size: int,
    options: JobOptions,
) -> TranscriptionJob:
    """Measure the upload (refusing what is not audio, is too long or holds non-numbers),
    hold its units against the caller's caps, keep it in the blob store, then add the job
    and its queue entry in one transaction. Nothing is billed until the job completes."""
    principal = ledger.principal
    assert principal is not None
    duration = await _measured(runtime, ledger, audio)
    units = billed_seconds(duration)
    clock = runtime.books.clock
    if principal.capped:  # refused before a GiB is stored
        async with transaction(runtime.sessions) as session:
            await hold_units(session, principal, ledger.request_id, units, clock())
    job_id = new_id("job")
    name = AUDIO_PREFIX + job_id
    try:
        await runtime.blobs.put_file(name, audio)
        async with transaction(runtime.sessions) as session:
            now = clock()
            if principal.capped:  # the same hold, now for as long as the job lasts
                await hold_units(
                    session, principal, ledger.request_id, units, now, now + HOLD_LIFETIME
                )
            job = TranscriptionJob(
                id=job_id,
                org_id=principal.org_id,
                key_id=principal.key_id,
                request_id=ledger.request_id,
                status=JobStatus.QUEUED.value,
                endpoint=options.endpoint.value,
                language=options.language,
                word_timestamps=options.word_timestamps,
                speakers=None if options.speakers is None else options.speakers.given(),
                keep_audio=options.keep_audio,
                webhook_url=options.webhook_url,
                audio=name,
                audio_bytes=size,
                duration=str(duration),
                done_seconds=0.0,
                created_at=now,
            )
            session.add(job)
            lease = runtime.settings.job_lease_seconds
            await queue.enqueue_in(session, queued_job(job_id, lease))
    except BaseException:
        await _forget(runtime, name, ledger.request_id, principal.capped)
        raise
    ledger.made(job_id)
    return job


async def _forget(runtime: Runtime, name: str, request_id: str, held: bool) -> None:
    """Undo a submission that did not commit (best effort: what is left is swept)."""
    with contextlib.suppress(Exception):
        await runtime.blobs.drop_file(name)
    if held:
        with contextlib.suppress(Exception):
            async with transaction(runtime.sessions) as session:
                await drop_hold(session, request_id)


async def _measured(runtime: Runtime, ledger: Ledger, audio: Path) -> Fraction:
    """The upload's exact duration, measured at batch priority a step at a time: decoding
    hours of audio must never keep a request from a worker (batch steps leave one free for
    requests), nor hold the only worker of a node for longer than a step."""
    job = Job(Capability.SPEECH_TO_TEXT, DECODER, abandoned=ledger.client_gone, batch=True)
    limit = runtime.settings.job_max_audio_seconds
    counted = runtime.pool.stream(job, _measuring, audio, NATIVE_POLICY.accepted, limit)
    duration = Fraction(0)
    with audio_errors_as_api_errors("audio", NATIVE_POLICY):
        async with aclosing(counted) as counts:
            async for count in counts:
                duration = count  # the last is the whole duration
    return duration


def _measuring(path: Path, accepted: AcceptedAudio, max_seconds: float) -> Iterator[Fraction]:
    # A generator, so that even identifying the file runs in its first step, on a worker.
    yield from measuring(path, max_seconds=max_seconds, fmt=identify_audio(path, accepted))


async def cancel_job(
    runtime: Runtime, queue: SqlQueue, job: TranscriptionJob
) -> TranscriptionJob | None:
    """Cancel a job under way: kept, cancelled, billed nothing; None if it has ended."""
    async with transaction(runtime.sessions) as session:
        if not await repository.cancel(session, job, runtime.books.clock()):
            return None
    queued = await queue.job(job.id)
    if queued is not None:  # a worker running it stops at its next piece
        await queue.abort(queued, "cancelled")
    await audio_let_go(runtime, job)
    async with runtime.sessions() as session:
        return await repository.job_by_id(session, job.id)


async def cancel_or_delete(
    runtime: Runtime, queue: SqlQueue, job: TranscriptionJob
) -> TranscriptionJob | None:
    """What DELETE does to `job` as the request found it: cancel it if it was under way
    (kept, cancelled, billed nothing) and answer it, or delete it, with its audio and
    transcript, if it had ended (None).

    A job found under way that ended meanwhile (another DELETE cancelled it, or it
    completed) is answered as it is now and kept: the caller asked while it ran, and
    deleting it would lose what the caller never saw. None too if another request
    deleted it since (after finding it ended)."""
    if not JobStatus(job.status).ended:
        cancelled = await cancel_job(runtime, queue, job)
        if cancelled is not None:
            return cancelled
        async with runtime.sessions() as session:
            return await repository.job_by_id(session, job.id)
    async with transaction(runtime.sessions) as session:
        await repository.delete_job(session, job.id)
    await drop_audio(runtime, job)
    return None


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
