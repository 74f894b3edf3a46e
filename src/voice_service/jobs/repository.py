"""The rows of transcription jobs: made, paged, progressed, settled once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.books.usage.caps import drop_hold
from voice_service.books.usage.charge import Charge
from voice_service.books.usage.repository import add_usage
from voice_service.core.models import TranscriptionJob
from voice_service.core.vocabulary import JobStatus
from voice_service.kit.paging import UnknownCursor, newest_first, page_of
from voice_service.webhooks.repository import delete_job_url_deliveries

_UNDER_WAY = (JobStatus.QUEUED.value, JobStatus.PROCESSING.value)


@dataclass(frozen=True, slots=True)
class JobPage:
    jobs: Sequence[TranscriptionJob]
    next: str | None  # the last job's id, when older ones follow


async def find_job(session: AsyncSession, org_id: str, job_id: str) -> TranscriptionJob | None:
    """The organization's job; None for another's as for one that does not exist."""
    return await session.scalar(
        select(TranscriptionJob).where(
            TranscriptionJob.id == job_id, TranscriptionJob.org_id == org_id
        )
    )


async def page_jobs(
    session: AsyncSession, org_id: str, *, limit: int, before: str | None = None
) -> JobPage:
    """Newest first (created_at, then id, both descending); a page continues strictly
    after the job `before` names."""
    after = None
    if before is not None:
        cursor = await find_job(session, org_id, before)
        if cursor is None:
            raise UnknownCursor(before)
        after = (cursor.created_at, cursor.id)
    query = newest_first(
        select(TranscriptionJob).where(TranscriptionJob.org_id == org_id),
        TranscriptionJob.created_at,
        TranscriptionJob.id,
        after=after,
        limit=limit,
    )
    rows, more = page_of(list(await session.scalars(query)), limit)
    return JobPage(rows, rows[-1].id if more else None)


async def job_by_id(session: AsyncSession, job_id: str) -> TranscriptionJob | None:
    return await session.get(TranscriptionJob, job_id, populate_existing=True)


async def start(session: AsyncSession, job_id: str, now: datetime) -> bool:
    """Mark a queued (or re-run) job processing; False if it has ended meanwhile."""
    started = await session.execute(
        update(TranscriptionJob)
        .where(TranscriptionJob.id == job_id, TranscriptionJob.status.in_(_UNDER_WAY))
        .values(status=JobStatus.PROCESSING.value, started_at=now, done_seconds=0.0)
    )
    return bool(started.rowcount)  # type: ignore[attr-defined]


async def progressed(session: AsyncSession, job_id: str, done_seconds: float) -> JobStatus | None:
    """Record how far the job is; its status now (a job cancelled meanwhile stops)."""
    await session.execute(
        update(TranscriptionJob)
        .where(TranscriptionJob.id == job_id, TranscriptionJob.status == JobStatus.PROCESSING.value)
        .values(done_seconds=done_seconds)
    )
    status = await session.scalar(
        select(TranscriptionJob.status).where(TranscriptionJob.id == job_id)
    )
    return None if status is None else JobStatus(status)


async def complete(
    session: AsyncSession,
    job: TranscriptionJob,
    result: dict[str, Any],
    language: str | None,
    charge: Charge,
    now: datetime,
) -> bool:
    """Settle a processing job as completed, in the caller's transaction: its transcript,
    its usage row (keyed by its POST's request id) in place of its hold, its audio let go
    unless kept (the caller deletes it after the commit). False, and nothing written, if it
    was settled already (a second run after a kill) or cancelled."""
    settled = await session.execute(
        update(TranscriptionJob)
        .where(TranscriptionJob.id == job.id, TranscriptionJob.status == JobStatus.PROCESSING.value)
        .values(
            status=JobStatus.COMPLETED.value,
            result=result,
            language=language,
            units=charge.units,
            done_seconds=float(job.duration_fraction),
            finished_at=now,
            audio=_audio_kept(job),
        )
    )
    if not settled.rowcount:  # type: ignore[attr-defined]
        return False
    await drop_hold(session, job.request_id)
    add_usage(session, job.org_id, job.key_id, job.request_id, charge, now)
    return True


async def fail(
    session: AsyncSession, job: TranscriptionJob, code: str, message: str, now: datetime
) -> bool:
    """Settle a job that is under way as failed (billed nothing, its hold dropped, its
    audio let go unless kept)."""
    return await _end(session, job, JobStatus.FAILED, now, error_code=code, error_message=message)


async def cancel(session: AsyncSession, job: TranscriptionJob, now: datetime) -> bool:
    """Cancel a job that is under way (as `fail`)."""
    return await _end(session, job, JobStatus.CANCELLED, now)


async def _end(
    session: AsyncSession, job: TranscriptionJob, status: JobStatus, now: datetime, **values: Any
) -> bool:
    ended = await session.execute(
        update(TranscriptionJob)
        .where(TranscriptionJob.id == job.id, TranscriptionJob.status.in_(_UNDER_WAY))
        .values(status=status.value, finished_at=now, audio=_audio_kept(job), **values)
    )
    if not ended.rowcount:  # type: ignore[attr-defined]
        return False
    await drop_hold(session, job.request_id)
    return True


def _audio_kept(job: TranscriptionJob) -> str | None:
    """What an ended job's `audio` becomes: its blob if it asked to keep it."""
    return job.audio if job.keep_audio else None


async def delete_job(session: AsyncSession, job_id: str) -> None:
    """The job, and the deliveries to its own URL (a webhook keeps its own history)."""
    await delete_job_url_deliveries(session, job_id)
    await session.execute(delete(TranscriptionJob).where(TranscriptionJob.id == job_id))


async def expired_jobs(
    session: AsyncSession, finished_before: datetime
) -> Sequence[TranscriptionJob]:
    """Ended jobs whose results are past keeping."""
    return list(
        await session.scalars(
            select(TranscriptionJob)
            .where(
                TranscriptionJob.status.not_in(_UNDER_WAY),
                TranscriptionJob.finished_at < finished_before,
            )
            .limit(500)
        )
    )


async def jobs_under_way(session: AsyncSession) -> Sequence[TranscriptionJob]:
    return list(
        await session.scalars(
            select(TranscriptionJob).where(TranscriptionJob.status.in_(_UNDER_WAY)).limit(500)
        )
    )


async def audio_in_use(session: AsyncSession, names: Sequence[str]) -> set[str]:
    """Of these blob names, those a job still refers to."""
    found = await session.scalars(
        select(TranscriptionJob.audio).where(TranscriptionJob.audio.in_(names))
    )
    return {name for name in found if name is not None}
