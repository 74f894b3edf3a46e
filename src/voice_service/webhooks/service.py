"""Registering webhooks, and telling them of events: `emit` makes one delivery per listening
webhook, and queues its first attempt, in the transaction of whatever the event is about (a
job settled), so an event is delivered if and only if it happened, and once."""

from __future__ import annotations

import base64
import json
import secrets
from datetime import datetime, timedelta
from typing import Any

from saq.job import Job as QueuedJob
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.errors import InvalidRequest
from voice_service.core.ids import new_id
from voice_service.core.models import SigningSecret, WebhookDelivery
from voice_service.kit.db import insert_if_absent
from voice_service.kit.job_queue import SqlQueue
from voice_service.kit.outbound import OutboundPolicy, OutboundRefused
from voice_service.webhooks import repository
from voice_service.webhooks.schemas import PENDING

QUEUE_NAME = "webhooks"
DELIVER = "deliver"  # the queue's function name for an attempt
# How long an organization's previous signing secret still signs after a rotation.
ROTATION_OVERLAP = timedelta(hours=24)


async def checked_url(
    allowed: frozenset[tuple[str, int | None]], url: str, param: str = "url"
) -> str:
    """A URL deliveries may go to now (each delivery checks it again: names move);
    `allowed`: the operator's OUTBOUND_ALLOWED_HOSTS."""
    try:
        await OutboundPolicy(allowed).check(url)
    except OutboundRefused as exc:
        raise InvalidRequest(f"{param}: {exc}.", param=param) from None
    return url


def new_secret() -> str:
    """A Standard Webhooks secret: `whsec_` and 24 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def attempt_job(
    delivery_id: str, retry: int, *, at: float = 0, round_: int = 0, deferred: int = 0
) -> QueuedJob:
    """The queue's entry for one attempt (`retry` 0: the first; `round_` counts
    redeliveries; `deferred` how often it was put off for want of a slot), keyed so each
    is queued once."""
    key = f"{delivery_id}:{round_}:{retry}" + (f":{deferred}" if deferred else "")
    return QueuedJob(
        function=DELIVER,
        kwargs={"delivery_id": delivery_id, "retry": retry, "deferred": deferred},
        key=key,
        scheduled=int(at),
        # Past the longest attempt deadline (WEBHOOK_TIMEOUT_SECONDS): only our own
        # hang (the database away while recording) reaches it.
        timeout=60,
        # A receiver's failure is recorded and the next attempt queued by the attempt
        # itself; these retries are for ours (the database away while it records).
        retries=3,
        retry_delay=5.0,
        ttl=3600,
    )


def payload(delivery_id: str, event: str, data: dict[str, Any], now: datetime) -> str:
    """The body every attempt sends: the Standard Webhooks shape (`type`, `timestamp`,
    `data`) with OpenAI's event fields (`id`, `object`, `created_at`), so either's SDK
    reads it."""
    return json.dumps(
        {
            "id": delivery_id,
            "object": "event",
            "type": event,
            "created_at": int(now.timestamp()),
            "timestamp": now.isoformat().replace("+00:00", "Z"),
            "data": data,
        },
        separators=(",", ":"),
    )


async def emit(
    session: AsyncSession,
    queue: SqlQueue,
    org_id: str,
    event: str,
    data: dict[str, Any],
    now: datetime,
    *,
    job_id: str | None = None,
    job_url: str | None = None,
) -> list[str]:
    """One delivery for each of the organization's webhooks that listens to `event`, and
    one to the `job_url` the job named, each with its first attempt queued, in the
    caller's transaction; their ids."""
    receivers: list[tuple[str | None, str | None]] = [
        (hook.id, None) for hook in await repository.listening(session, org_id, event)
    ]
    if job_url is not None:
        receivers.append((None, job_url))
    made = []
    for webhook_id, url in receivers:
        delivery_id = new_id("msg")
        session.add(
            WebhookDelivery(
                id=delivery_id,
                webhook_id=webhook_id,
                url=url,
                job_id=job_id,
                org_id=org_id,
                event=event,
                payload=payload(delivery_id, event, data, now),
                status=PENDING,
                attempts=0,
                created_at=now,
            )
        )
        await queue.enqueue_in(session, attempt_job(delivery_id, 0))
        made.append(delivery_id)
    return made


async def rotate_signing_secret(session: AsyncSession, org_id: str, now: datetime) -> SigningSecret:
    """The organization's new signing secret (its first, or one in place of the last,
    which goes on signing beside it for `ROTATION_OVERLAP`)."""
    # Two first calls at once: one makes it, the other rotates it.
    made = await session.execute(
        insert_if_absent(session.get_bind().dialect, SigningSecret).values(
            org_id=org_id, secret=new_secret(), created_at=now
        )
    )
    found = await session.get(SigningSecret, org_id, with_for_update=True)
    assert found is not None
    if made.rowcount:  # type: ignore[attr-defined]
        return found
    found.previous, found.previous_until = found.secret, now + ROTATION_OVERLAP
    found.secret, found.created_at = new_secret(), now
    return found


def signing_secrets(found: SigningSecret, now: datetime) -> list[str]:
    """The secrets a delivery to a job's own URL is signed with now."""
    previous, until = found.previous, found.previous_until
    if previous is not None and until is not None and now < until:
        return [found.secret, previous]
    return [found.secret]


async def redeliver(session: AsyncSession, queue: SqlQueue, delivery: WebhookDelivery) -> None:
    """Send a delivery again, with its own `webhook-id`, and its retries if it fails."""
    delivery.status = PENDING
    await queue.enqueue_in(session, attempt_job(delivery.id, 0, round_=delivery.attempts))
