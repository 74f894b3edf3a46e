"""One attempt at a delivery: signed with the webhook's secret at the moment it is sent
(receivers refuse a timestamp minutes old), POSTed to the URL's checked address, recorded
whatever happens; a failure queues the next attempt after the next wait of the schedule,
until the schedule runs out."""

from __future__ import annotations

import logging
import time
from datetime import datetime

import httpx
from sqlalchemy import select
from standardwebhooks.webhooks import Webhook as Signer

from voice_service.core.models import Webhook, WebhookDelivery
from voice_service.kit.db import transaction
from voice_service.kit.job_queue import SqlQueue
from voice_service.kit.outbound import OutboundPolicy, OutboundRefused
from voice_service.runtime import Runtime
from voice_service.webhooks import repository
from voice_service.webhooks.service import attempt_job

logger = logging.getLogger(__name__)

TIMEOUT_SECONDS = 15.0
USER_AGENT = "voice-service-webhooks/1"


def signed_headers(secret: str, delivery_id: str, body: str, now: datetime) -> dict[str, str]:
    """The Standard Webhooks headers for `body` sent now."""
    return {
        "webhook-id": delivery_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Signer(secret).sign(delivery_id, now, body),
    }


async def attempt(
    runtime: Runtime,
    queue: SqlQueue,
    client: httpx.AsyncClient,
    delivery_id: str,
    retry: int,
) -> None:
    async with runtime.sessions() as session:
        found = (
            await session.execute(
                select(WebhookDelivery, Webhook)
                .join(Webhook, Webhook.id == WebhookDelivery.webhook_id)
                .where(WebhookDelivery.id == delivery_id)
            )
        ).first()
    if found is None:
        return  # its webhook was deleted
    delivery, hook = found
    if delivery.status == repository.DELIVERED:
        return  # a duplicate attempt (its worker killed after it was recorded)
    policy = OutboundPolicy(runtime.settings.outbound_allowed)
    now = runtime.books.clock()
    started = time.monotonic()
    status_code: int | None = None
    error: str | None = None
    try:
        if not hook.enabled:
            raise OutboundRefused("the webhook is disabled")
        target = await policy.check(hook.url)
        answer = await client.post(
            target.url,
            content=delivery.payload.encode(),
            headers={
                "Host": target.host_header,
                "Content-Type": "application/json",
                "User-Agent": USER_AGENT,
                **signed_headers(hook.secret, delivery.id, delivery.payload, now),
            },
            extensions={"sni_hostname": target.host},
        )
        status_code = answer.status_code
    except OutboundRefused as exc:
        error = f"refused: {exc}"
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"[:300] or type(exc).__name__
    delivered = status_code is not None and 200 <= status_code < 300
    schedule = runtime.settings.webhook_retries
    last = retry >= len(schedule) or not hook.enabled
    latency = round((time.monotonic() - started) * 1000)
    async with transaction(runtime.sessions) as session:
        number = await repository.attempted(
            session, delivery, status_code, latency, error, now, delivered=delivered, last=last
        )
        if not delivered and not last:
            at = time.time() + schedule[retry]
            await queue.enqueue_in(
                session, attempt_job(delivery.id, retry + 1, at=at, round_=number - retry - 1)
            )
    if not delivered:
        logger.info("webhook delivery %s attempt %d: %s", delivery.id, number, status_code or error)
