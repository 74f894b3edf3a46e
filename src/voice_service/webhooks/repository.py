"""The rows of webhooks, their deliveries and each delivery's attempts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Select, delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.models import Webhook, WebhookAttempt, WebhookDelivery
from voice_service.webhooks.schemas import DELIVERED, FAILED, PENDING


async def find_webhook(session: AsyncSession, org_id: str, webhook_id: str) -> Webhook | None:
    """The organization's webhook; None for another's as for one that does not exist."""
    return await session.scalar(
        select(Webhook).where(Webhook.id == webhook_id, Webhook.org_id == org_id)
    )


async def list_webhooks(session: AsyncSession, org_id: str) -> Sequence[Webhook]:
    return list(
        await session.scalars(
            select(Webhook).where(Webhook.org_id == org_id).order_by(Webhook.created_at, Webhook.id)
        )
    )


async def listening(session: AsyncSession, org_id: str, event: str) -> Sequence[Webhook]:
    """The organization's enabled webhooks that want `event`."""
    hooks = await session.scalars(
        select(Webhook).where(Webhook.org_id == org_id, Webhook.enabled.is_(True))
    )
    return [hook for hook in hooks if event in hook.events]


async def delete_webhook(session: AsyncSession, webhook_id: str) -> None:
    deliveries = select(WebhookDelivery.id).where(WebhookDelivery.webhook_id == webhook_id)
    await session.execute(delete(WebhookAttempt).where(WebhookAttempt.delivery_id.in_(deliveries)))
    await session.execute(delete(WebhookDelivery).where(WebhookDelivery.webhook_id == webhook_id))
    await session.execute(delete(Webhook).where(Webhook.id == webhook_id))


async def delete_job_url_deliveries(session: AsyncSession, job_id: str) -> None:
    own = select(WebhookDelivery.id).where(
        WebhookDelivery.job_id == job_id, WebhookDelivery.webhook_id.is_(None)
    )
    await session.execute(delete(WebhookAttempt).where(WebhookAttempt.delivery_id.in_(own)))
    await session.execute(
        delete(WebhookDelivery).where(
            WebhookDelivery.job_id == job_id, WebhookDelivery.webhook_id.is_(None)
        )
    )


async def recent_deliveries(
    session: AsyncSession, webhook_id: str, limit: int
) -> Sequence[tuple[WebhookDelivery, Sequence[WebhookAttempt]]]:
    """The webhook's newest deliveries, each with its attempts in order."""
    return await _with_attempts(
        session,
        select(WebhookDelivery)
        .where(WebhookDelivery.webhook_id == webhook_id)
        .order_by(WebhookDelivery.created_at.desc(), WebhookDelivery.id.desc())
        .limit(limit),
    )


async def job_deliveries(
    session: AsyncSession, org_id: str, job_id: str
) -> Sequence[tuple[WebhookDelivery, Sequence[WebhookAttempt]]]:
    """What the organization's webhooks and the job's own URL were told of the job."""
    return await _with_attempts(
        session,
        select(WebhookDelivery)
        .where(WebhookDelivery.job_id == job_id, WebhookDelivery.org_id == org_id)
        .order_by(WebhookDelivery.created_at, WebhookDelivery.id),
    )


async def with_attempts(
    session: AsyncSession, delivery: WebhookDelivery
) -> tuple[WebhookDelivery, Sequence[WebhookAttempt]]:
    attempts = await session.scalars(
        select(WebhookAttempt)
        .where(WebhookAttempt.delivery_id == delivery.id)
        .order_by(WebhookAttempt.number)
    )
    return delivery, list(attempts)


async def _with_attempts(
    session: AsyncSession, deliveries_query: Select[WebhookDelivery]
) -> Sequence[tuple[WebhookDelivery, Sequence[WebhookAttempt]]]:
    deliveries = list(await session.scalars(deliveries_query))
    attempts = await session.scalars(
        select(WebhookAttempt)
        .where(WebhookAttempt.delivery_id.in_([d.id for d in deliveries]))
        .order_by(WebhookAttempt.number)
    )
    by_delivery: dict[str, list[WebhookAttempt]] = {d.id: [] for d in deliveries}
    for attempt in attempts:
        by_delivery[attempt.delivery_id].append(attempt)
    return [(d, by_delivery[d.id]) for d in deliveries]


async def find_delivery(
    session: AsyncSession,
    org_id: str,
    delivery_id: str,
    *,
    webhook_id: str | None = None,
    job_id: str | None = None,
) -> WebhookDelivery | None:
    """The organization's delivery, if it went to `webhook_id` or told of `job_id` (where
    given); None for any other, as for one that does not exist."""
    query = select(WebhookDelivery).where(
        WebhookDelivery.id == delivery_id, WebhookDelivery.org_id == org_id
    )
    if webhook_id is not None:
        query = query.where(WebhookDelivery.webhook_id == webhook_id)
    if job_id is not None:
        query = query.where(WebhookDelivery.job_id == job_id)
    return await session.scalar(query)


async def attempted(
    session: AsyncSession,
    delivery: WebhookDelivery,
    status_code: int | None,
    latency_ms: int,
    error: str | None,
    now: datetime,
    *,
    delivered: bool,
    last: bool,
) -> int:
    """Record an attempt; the delivery is delivered, failed (its `last` attempt), or still
    pending. Returns the attempt's number."""
    number = delivery.attempts + 1
    session.add(
        WebhookAttempt(
            delivery_id=delivery.id,
            number=number,
            at=now,
            status_code=status_code,
            latency_ms=latency_ms,
            error=error,
        )
    )
    status = DELIVERED if delivered else FAILED if last else PENDING
    await session.execute(
        update(WebhookDelivery)
        .where(WebhookDelivery.id == delivery.id)
        .values(
            attempts=number,
            status=status,
            delivered_at=now if delivered else WebhookDelivery.delivered_at,
        )
    )
    return number
