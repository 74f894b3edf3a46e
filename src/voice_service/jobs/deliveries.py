"""What webhooks were told of a job, and telling them again."""

from __future__ import annotations

from collections.abc import Sequence

from voice_service.core.errors import NotFound
from voice_service.core.models import WebhookAttempt, WebhookDelivery
from voice_service.jobs.reading import find_job
from voice_service.kit.db import transaction
from voice_service.kit.job_queue import SqlQueue
from voice_service.runtime import Runtime
from voice_service.webhooks import repository as webhooks
from voice_service.webhooks.service import redeliver

Delivered = tuple[WebhookDelivery, Sequence[WebhookAttempt]]  # a delivery, its attempts in order


async def job_deliveries(runtime: Runtime, org_id: str, job_id: str) -> Sequence[Delivered]:
    """What the organization's webhooks and the job's own URL were told of the
    organization's job."""
    async with runtime.sessions() as session:
        await find_job(session, org_id, job_id)
        return await webhooks.job_deliveries(session, org_id, job_id)


async def redeliver_job_delivery(
    runtime: Runtime, queue: SqlQueue, org_id: str, job_id: str, delivery_id: str
) -> Delivered:
    """Send one of the job's deliveries again (with its retries, should it fail) from
    `queue`, the deliveries' queue."""
    async with transaction(runtime.sessions) as session:
        await find_job(session, org_id, job_id)
        delivery = await webhooks.find_delivery(session, org_id, delivery_id, job_id=job_id)
        if delivery is None:
            raise NotFound(f"No delivery with id {delivery_id!r} of this job.")
        await redeliver(session, queue, delivery)
        return await webhooks.with_attempts(session, delivery)
