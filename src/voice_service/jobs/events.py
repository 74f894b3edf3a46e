"""What a job's webhooks are told when it ends: the job's summary, not its transcript (a
receiver fetches that with the job's id, in the format it wants)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.models import TranscriptionJob
from voice_service.core.vocabulary import WebhookEvent
from voice_service.kit.job_queue import SqlQueue
from voice_service.webhooks.service import emit


async def announce(
    session: AsyncSession,
    webhooks: SqlQueue,
    job: TranscriptionJob,
    event: WebhookEvent,
    now: datetime,
    **ended: Any,
) -> None:
    """In the transaction that settles the job: `ended` holds what it settled to
    (`units`, or `error_code` and `error_message`)."""
    data = {
        "id": job.id,
        "object": "transcription_job",
        "status": "completed" if event is WebhookEvent.TRANSCRIPTION_COMPLETED else "failed",
        "request_id": job.request_id,
        "duration_seconds": float(job.duration_fraction),
        "billed_as": job.endpoint,
        **ended,
    }
    await emit(
        session,
        webhooks,
        job.org_id,
        event.value,
        data,
        now,
        job_id=job.id,
        job_url=job.webhook_url,
    )
