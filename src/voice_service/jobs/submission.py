"""Submitting a job, of an uploaded file or of one fetched from a URL: its options checked,
its Idempotency-Key claimed, the people it names heard, its audio measured and kept, its
units held, and the job and its queue entry added in one transaction."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import httpx

from voice_service.audio.decode import measuring
from voice_service.audio.formats import AcceptedAudio, identify_audio
from voice_service.audio.policy import NATIVE_POLICY, audio_errors_as_api_errors
from voice_service.books.ledger import Ledger
from voice_service.core.errors import InvalidRequest, PayloadTooLarge
from voice_service.core.ids import new_id
from voice_service.core.models import TranscriptionJob
from voice_service.core.vocabulary import Capability, JobStatus, megabytes
from voice_service.engines.catalog import DECODER
from voice_service.inference.admission import Job
from voice_service.jobs.options import JobOptions, JobRequest, asked_options
from voice_service.jobs.service import AUDIO_PREFIX, HOLD_LIFETIME, queued_job
from voice_service.kit.db import transaction
from voice_service.kit.job_queue import SqlQueue
from voice_service.kit.outbound import FetchFailed, OutboundPolicy, OutboundRefused, fetch_to_file
from voice_service.runtime import Runtime
from voice_service.tenancy.principal import Principal
from voice_service.transcription.service import billed_seconds

# Claims the request's Idempotency-Key, if it has one (or raises its first answer).
Claim = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class AudioFile:
    """A job's audio, received: where it is and how many bytes."""

    path: Path
    size: int


async def submit_upload(
    runtime: Runtime,
    queue: SqlQueue,
    ledger: Ledger,
    request: JobRequest,
    audio: AudioFile,
    *,
    claim: Claim,
) -> TranscriptionJob:
    """A job of an uploaded file (checked against the job upload limit by the surface)."""
    options = await _options(runtime, _principal(ledger), request, claim)
    return await _submit(runtime, queue, ledger, audio, options)


async def submit_from_url(
    runtime: Runtime,
    queue: SqlQueue,
    ledger: Ledger,
    request: JobRequest,
    url: str,
    *,
    claim: Claim,
) -> TranscriptionJob:
    """A job of the file at `url`, fetched once its options are checked and its
    Idempotency-Key claimed (a replay fetches nothing)."""
    options = await _options(runtime, _principal(ledger), request, claim)
    settings = runtime.settings
    async with _fetched(
        OutboundPolicy(settings.outbound_allowed),
        url,
        runtime.uploads_dir,
        settings.job_max_upload_bytes,
        settings.job_fetch_timeout_seconds,
    ) as fetched:
        return await _submit(runtime, queue, ledger, fetched, options)


def _principal(ledger: Ledger) -> Principal:
    principal = ledger.principal
    assert principal is not None
    return principal


async def _options(
    runtime: Runtime, principal: Principal, request: JobRequest, claim: Claim
) -> JobOptions:
    """The options checked, then the key claimed, then the people named heard: a replay
    costs no inference, and a refused request claims no key."""
    asked = await asked_options(runtime, principal.org_id, request)
    await claim()
    return await asked.heard(runtime)


@asynccontextmanager
async def _fetched(
    policy: OutboundPolicy, url: str, directory: Path, max_bytes: int, most_seconds: float
) -> AsyncIterator[AudioFile]:
    """The file at a URL the caller named, downloaded into `directory` (at most `max_bytes`,
    within `most_seconds`, where `policy` lets it go), and removed on exit. What goes
    wrong is the caller's 400 (or 413), saying why."""
    handle, name = tempfile.mkstemp(dir=directory, prefix="fetch-")
    path = Path(name)
    try:
        with os.fdopen(handle, "wb") as file:
            async with httpx.AsyncClient(follow_redirects=False, timeout=30) as client:
                try:
                    async with asyncio.timeout(most_seconds):
                        size = await fetch_to_file(policy, client, url, file, max_bytes)
                except OutboundRefused as exc:
                    raise InvalidRequest(f"url: {exc}.", param="url") from None
                except FetchFailed as exc:
                    if exc.too_large:
                        limit = megabytes(max_bytes)
                        raise PayloadTooLarge(f"url: the file exceeds the {limit} limit.") from None
                    raise InvalidRequest(f"url: {exc}.", param="url") from None
                except (TimeoutError, httpx.HTTPError) as exc:
                    reason = "took too long" if isinstance(exc, TimeoutError) else "failed"
                    raise InvalidRequest(f"url: the download {reason}.", param="url") from None
        yield AudioFile(path, size)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


async def _submit(
    runtime: Runtime, queue: SqlQueue, ledger: Ledger, audio: AudioFile, options: JobOptions
) -> TranscriptionJob:
    """Measure the upload (refusing what is not audio, is too long or holds non-numbers),
    hold its units against the caller's caps, keep it in the blob store, then add the job
    and its queue entry in one transaction. Nothing is billed until the job completes."""
    principal = _principal(ledger)
    duration = await _measured(runtime, ledger, audio.path)
    units = billed_seconds(duration)
    await ledger.hold(units)  # refused before a GiB is stored
    job_id = new_id("job")
    name = AUDIO_PREFIX + job_id
    try:
        await runtime.blobs.put_file(name, audio.path)
        async with transaction(runtime.sessions) as session:
            now = runtime.books.clock()
            # The same hold, now for as long as the job lasts.
            await ledger.hold_for_job(session, units, now + HOLD_LIFETIME)
            job = TranscriptionJob(
                id=job_id,
                org_id=principal.org_id,
                key_id=principal.key_id,
                request_id=ledger.request_id,
                status=JobStatus.QUEUED.value,
                endpoint=options.endpoint.value,
                language=options.language,
                model=options.model,
                word_timestamps=options.word_timestamps,
                speakers=None if options.speakers is None else options.speakers.given(),
                keep_audio=options.keep_audio,
                webhook_url=options.webhook_url,
                audio=name,
                audio_bytes=audio.size,
                duration=str(duration),
                done_seconds=0.0,
                created_at=now,
            )
            session.add(job)
            lease = runtime.settings.job_lease_seconds
            await queue.enqueue_in(session, queued_job(job_id, lease))
    except BaseException:
        # A submission that did not commit: its audio goes (best effort: what is left is
        # swept), and its hold with the request's unbilled answer.
        with contextlib.suppress(Exception):
            await runtime.blobs.drop_file(name)
        raise
    ledger.job_took_hold()
    ledger.made(job_id)
    return job


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
