"""The jobs page: the organization's transcription jobs, newest first, paged as the request
log is; a completed job's transcript as a file; cancelling a job under way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from fastapi import APIRouter, Request, Response

from voice_service.console.auth import (
    ActingUser,
    CurrentOrg,
    PageNotFound,
    SignedInUser,
    checked_form,
)
from voice_service.console.pages import CONSOLE_PREFIX, redirect, render
from voice_service.console.security import secure_headers
from voice_service.core.errors import NotFound
from voice_service.core.models import Organization, TranscriptionJob
from voice_service.core.vocabulary import JobStatus
from voice_service.jobs.reading import job_of, page_of_jobs_or_newest, transcript_of
from voice_service.jobs.schemas import TranscriptionJobOut
from voice_service.jobs.service import cancel_job
from voice_service.jobs.transcripts import MEDIA_TYPES, TranscriptFormat, transcript_file
from voice_service.web.deps import Context

router = APIRouter()

PAGE_SIZE = 50
# A download's file extension, and the transcript format it is (None: the job as JSON,
# as the API's GET of the job answers it).
DOWNLOADS: Final[dict[str, TranscriptFormat | None]] = {
    "txt": "text",
    "srt": "srt",
    "vtt": "vtt",
    "json": None,
}
DOWNLOAD_LABELS: Final = {"txt": "Text", "srt": "SRT", "vtt": "VTT", "json": "JSON"}
_BADGES: Final = {
    JobStatus.QUEUED: "badge",
    JobStatus.PROCESSING: "badge badge-accent",
    JobStatus.COMPLETED: "badge badge-ok",
    JobStatus.FAILED: "badge badge-err",
    JobStatus.CANCELLED: "badge badge-off",
}


@dataclass(frozen=True, slots=True)
class JobRow:
    """A job as its row shows it."""

    job: TranscriptionJobOut
    badge: str
    duration: str  # "58:02"
    progress: str  # "12:30 of 58:02"
    percent: int  # of the audio transcribed, 0 to 100

    @classmethod
    def of(cls, job: TranscriptionJob) -> JobRow:
        shown = TranscriptionJobOut.of(job, with_result=False)
        total, done = shown.duration_seconds, min(shown.progress_seconds, shown.duration_seconds)
        percent = 100 if total <= 0 else int(100 * done / total)
        return cls(
            job=shown,
            badge=_BADGES[shown.status],
            duration=clock_time(total),
            progress=f"{clock_time(done)} of {clock_time(total)}",
            percent=percent,
        )

    @property
    def under_way(self) -> bool:
        return not self.job.status.ended


def clock_time(seconds: float) -> str:
    """Seconds as a clock shows them: "7:05", "1:02:09" (whole seconds, rounded down)."""
    hours, rest = divmod(int(seconds), 3600)
    minutes, whole = divmod(rest, 60)
    return f"{hours}:{minutes:02}:{whole:02}" if hours else f"{minutes}:{whole:02}"


@router.get("/orgs/{org_id}/jobs")
async def jobs_page(
    request: Request,
    context: Context,
    user: SignedInUser,
    org: CurrentOrg,
    before: str | None = None,
) -> Response:
    page, lost = await page_of_jobs_or_newest(context, org.id, limit=PAGE_SIZE, before=before)
    error = "That page no longer exists; showing the newest jobs." if lost else None
    return render(
        request,
        "jobs.html",
        user=user,
        org=org,
        rows=[JobRow.of(job) for job in page.jobs],
        next_id=page.next,
        paged=before is not None,
        error=error,
        downloads=DOWNLOAD_LABELS,
        can_cancel=context.jobs is not None,
    )


@router.get("/orgs/{org_id}/jobs/{job_id}/transcript.{extension}")
async def transcript_download(
    job_id: str, extension: str, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    if extension not in DOWNLOADS:
        raise PageNotFound()
    job = await _find(context, org, job_id)
    transcript = transcript_of(job)
    transcript_format = DOWNLOADS[extension]
    if transcript_format is None:
        body, media_type = TranscriptionJobOut.of(job).model_dump_json(), "application/json"
    else:
        body = transcript_file(transcript, transcript_format)
        media_type = MEDIA_TYPES[transcript_format]
    response = Response(
        body,
        media_type=media_type,
        headers={"Content-Disposition": f'attachment; filename="{job.id}.{extension}"'},
    )
    return secure_headers(response)


@router.post("/orgs/{org_id}/jobs/{job_id}/cancel")
async def cancel_action(
    job_id: str, request: Request, context: Context, org: CurrentOrg, actor: ActingUser
) -> Response:
    await checked_form(request, actor.user)
    if context.jobs is None:  # no queue here to cancel it in: the page offers no button
        raise PageNotFound()
    # A job that has ended meanwhile is left as it ended.
    try:
        await cancel_job(context, context.jobs.queue, org.id, job_id, actor=actor)
    except NotFound:  # another organization's job is as unknown as one that never was
        raise PageNotFound() from None
    return redirect(f"{CONSOLE_PREFIX}/orgs/{org.id}/jobs")


async def _find(context: Context, org: Organization, job_id: str) -> TranscriptionJob:
    try:
        return await job_of(context, org.id, job_id)
    except NotFound:  # another organization's job is as unknown as one that never was
        raise PageNotFound() from None
