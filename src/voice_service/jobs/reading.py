"""Reading an organization's jobs: one job, a page of them, a completed one's transcript."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.errors import InvalidRequest, NotFound
from voice_service.core.models import TranscriptionJob
from voice_service.jobs import repository
from voice_service.jobs.repository import JobPage
from voice_service.jobs.schemas import JobTranscript
from voice_service.kit.paging import UnknownCursor
from voice_service.runtime import Runtime


async def find_job(session: AsyncSession, org_id: str, job_id: str) -> TranscriptionJob:
    """The organization's job; NotFound for another's as for one that does not exist."""
    job = await repository.find_job(session, org_id, job_id)
    if job is None:
        # The same answer for another organization's job and an unknown one.
        raise NotFound(f"No transcription job with id {job_id!r}.")
    return job


async def job_of(runtime: Runtime, org_id: str, job_id: str) -> TranscriptionJob:
    """`find_job` in a session of its own."""
    async with runtime.sessions() as session:
        return await find_job(session, org_id, job_id)


async def page_of_jobs(
    runtime: Runtime, org_id: str, *, limit: int, before: str | None = None
) -> JobPage:
    """The organization's jobs, newest first, after the job `before` names; an unknown
    `before` is the caller's error."""
    async with runtime.sessions() as session:
        try:
            return await repository.page_jobs(session, org_id, limit=limit, before=before)
        except UnknownCursor:
            raise InvalidRequest(f"before: no job {before!r} in this organization.") from None


async def page_of_jobs_or_newest(
    runtime: Runtime, org_id: str, *, limit: int, before: str | None = None
) -> tuple[JobPage, bool]:
    """`page_of_jobs`, or the newest page where `before` names no job of the organization
    (any more); True with the newest page in its place."""
    async with runtime.sessions() as session:
        try:
            return await repository.page_jobs(session, org_id, limit=limit, before=before), False
        except UnknownCursor:
            return await repository.page_jobs(session, org_id, limit=limit), True


def transcript_of(job: TranscriptionJob, param: str | None = None) -> JobTranscript:
    """A completed job's transcript; InvalidRequest (naming the field `param` that asked
    for it, if one did) for a job that has not completed."""
    if job.result is None:
        subject = "The job" if param is None else f"{param}: the job"
        raise InvalidRequest(
            f"{subject} is {job.status}; its transcript exists once it has completed.",
            param=param,
        )
    return JobTranscript.model_validate(job.result)
