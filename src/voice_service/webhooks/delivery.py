"""One attempt at a delivery: signed with the webhook's secret (a job's own URL: the
organization's signing secrets) at the moment it is sent
(receivers refuse a timestamp minutes old), POSTed to the URL's checked address, recorded
whatever happens; a failure queues the next attempt after the next wait of the schedule,
until the schedule runs out."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import httpx
from sqlalchemy.ext.asyncio import AsyncSession
from standardwebhooks.webhooks import Webhook as Signer

from voice_service.core.models import SigningSecret, Webhook, WebhookDelivery
from voice_service.kit.db import transaction
from voice_service.kit.job_queue import SqlQueue
from voice_service.kit.outbound import OutboundPolicy, OutboundRefused
from voice_service.runtime import Runtime
from voice_service.webhooks import repository
from voice_service.webhooks.service import attempt_job, signing_secrets

logger = logging.getLogger(__name__)

TIMEOUT_SECONDS = 15.0
USER_AGENT = "voice-service-webhooks/1"


def signed_headers(
    secrets: Sequence[str], delivery_id: str, body: str, now: datetime
) -> dict[str, str]:
    """The Standard Webhooks headers for `body` sent now: one signature per secret."""
    return {
        "webhook-id": delivery_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": " ".join(
            Signer(secret).sign(delivery_id, now, body) for secret in secrets
        ),
    }


@dataclass(frozen=True, slots=True)
class _Receiver:
    url: str
    secrets: list[str]
    enabled: bool


async def _receiver(
    session: AsyncSession, delivery: WebhookDelivery, now: datetime
) -> _Receiver | None:
    """Where the delivery goes and what signs it; None once its webhook is deleted."""
    if delivery.webhook_id is not None:
        hook = await session.get(Webhook, delivery.webhook_id)
        return None if hook is None else _Receiver(hook.url, [hook.secret], hook.enabled)
    found = await session.get(SigningSecret, delivery.org_id)
    assert delivery.url is not None and found is not None  # a job's URL needs the secret
    return _Receiver(delivery.url, signing_secrets(found, now), enabled=True)


async def attempt(
    runtime: Runtime,
    queue: SqlQueue,
    client: httpx.AsyncClient,
    delivery_id: str,
    retry: int,
) -> None:
    now = runtime.books.clock()
    async with runtime.sessions() as session:
        delivery = await session.get(WebhookDelivery, delivery_id)
        receiver = await _receiver(session, delivery, now) if delivery is not None else None
    if delivery is None or receiver is None:
        return  # deleted, or its webhook was
    if delivery.status == repository.DELIVERED:
        return  # a duplicate attempt (its worker killed after it was recorded)
    policy = OutboundPolicy(runtime.settings.outbound_allowed)
    started = time.monotonic()
    status_code: int | None = None
    error: str | None = None
    try:
        if not receiver.enabled:
            raise OutboundRefused("the webhook is disabled")
        target = await policy.check(receiver.url)
        answer = await client.post(
            target.url,
            content=delivery.payload.encode(),
            headers={
                "Host": target.host_header,
                "Content-Type": "application/json",
                "User-Agent": USER_AGENT,
                **signed_headers(receiver.secrets, delivery.id, delivery.payload, now),
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
    last = retry >= len(schedule) or not receiver.enabled
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
