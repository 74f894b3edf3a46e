"""An organization's webhook endpoints and its signing secret, for the API and the console
alike: register, list, change, enable or disable, delete, a webhook's deliveries and
redelivering one. A change made on a console user's behalf takes their `Actor`, and its audit
event commits with the change."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.errors import InvalidRequest, NotFound
from voice_service.core.ids import new_id
from voice_service.core.models import SigningSecret, Webhook, WebhookAttempt, WebhookDelivery
from voice_service.kit.db import transaction
from voice_service.kit.job_queue import SqlQueue
from voice_service.runtime import Runtime
from voice_service.tenancy.audit import Action, Actor
from voice_service.webhooks import repository
from voice_service.webhooks.schemas import MAX_DESCRIPTION_LENGTH
from voice_service.webhooks.service import (
    checked_url,
    new_secret,
    redeliver,
    rotate_signing_secret,
)

DeliveryWithAttempts = tuple[WebhookDelivery, Sequence[WebhookAttempt]]


async def create_webhook(
    runtime: Runtime,
    org_id: str,
    url: str,
    events: Sequence[str],
    description: str | None,
    *,
    actor: Actor | None = None,
) -> Webhook:
    """Register a webhook for the organization; its secret is on the row returned."""
    url = await checked_url(runtime.settings.outbound_allowed, url)
    _check_description(description)
    hook = Webhook(
        id=new_id("wh"),
        org_id=org_id,
        url=url,
        events=list(dict.fromkeys(events)),
        secret=new_secret(),
        description=description,
        enabled=True,
        created_at=runtime.books.clock(),
    )
    async with transaction(runtime.sessions) as session:
        session.add(hook)
        if actor is not None:
            actor.record(session, Action.WEBHOOK_CREATED, f"{hook.id} in {org_id}")
    return hook


async def list_webhooks(runtime: Runtime, org_id: str) -> Sequence[Webhook]:
    """The organization's webhooks, oldest first."""
    async with runtime.sessions() as session:
        return await repository.list_webhooks(session, org_id)


async def get_webhook(runtime: Runtime, org_id: str, webhook_id: str) -> Webhook:
    """The organization's webhook, or NotFound."""
    async with runtime.sessions() as session:
        return await _find(session, org_id, webhook_id)


async def update_webhook(
    runtime: Runtime,
    org_id: str,
    webhook_id: str,
    *,
    url: str | None = None,
    events: Sequence[str] | None = None,
    description: str | None = None,
    enabled: bool | None = None,
    actor: Actor | None = None,
) -> Webhook:
    """Change what is given of a webhook (None: left as it is); the actor's event names
    the enabling or disabling."""
    if url is not None:
        url = await checked_url(runtime.settings.outbound_allowed, url)
    _check_description(description)
    async with transaction(runtime.sessions) as session:
        hook = await _find(session, org_id, webhook_id)
        if url is not None:
            hook.url = url
        if events is not None:
            hook.events = list(dict.fromkeys(events))
        if description is not None:
            hook.description = description
        if enabled is not None:
            hook.enabled = enabled
            if actor is not None:
                action = Action.WEBHOOK_ENABLED if enabled else Action.WEBHOOK_DISABLED
                actor.record(session, action, f"{hook.id} in {org_id}")
        return hook


async def delete_webhook(
    runtime: Runtime, org_id: str, webhook_id: str, *, actor: Actor | None = None
) -> None:
    """Delete the organization's webhook with its deliveries and their attempts."""
    async with transaction(runtime.sessions) as session:
        hook = await _find(session, org_id, webhook_id)
        await repository.delete_webhook(session, hook.id)
        if actor is not None:
            actor.record(session, Action.WEBHOOK_DELETED, f"{hook.id} in {org_id}")


async def webhook_deliveries(
    runtime: Runtime, org_id: str, webhook_id: str, limit: int
) -> tuple[Webhook, Sequence[DeliveryWithAttempts]]:
    """The webhook and its `limit` newest deliveries, each with its attempts."""
    async with runtime.sessions() as session:
        hook = await _find(session, org_id, webhook_id)
        return hook, await repository.recent_deliveries(session, hook.id, limit)


async def redeliver_delivery(
    runtime: Runtime,
    queue: SqlQueue,
    org_id: str,
    webhook_id: str,
    delivery_id: str,
    *,
    actor: Actor | None = None,
) -> DeliveryWithAttempts:
    """Send one of the webhook's deliveries again; it and its attempts so far."""
    async with transaction(runtime.sessions) as session:
        hook = await _find(session, org_id, webhook_id)
        delivery = await repository.find_delivery(session, org_id, delivery_id, webhook_id=hook.id)
        if delivery is None:
            raise NotFound(f"No delivery with id {delivery_id!r} of this webhook.")
        await redeliver(session, queue, delivery)
        if actor is not None:
            target = f"{delivery.id} of {hook.id} in {org_id}"
            actor.record(session, Action.DELIVERY_REDELIVERED, target)
        return await repository.with_attempts(session, delivery)


async def new_signing_secret(runtime: Runtime, org_id: str) -> SigningSecret:
    """The organization's first signing secret, or a new one in place of the last."""
    async with transaction(runtime.sessions) as session:
        return await rotate_signing_secret(session, org_id, runtime.books.clock())


async def get_signing_secret(runtime: Runtime, org_id: str) -> SigningSecret:
    """The organization's signing secret, or NotFound."""
    found = await signing_secret(runtime, org_id)
    if found is None:
        raise NotFound("The organization has no signing secret; POST one.")
    return found


async def signing_secret(runtime: Runtime, org_id: str) -> SigningSecret | None:
    async with runtime.sessions() as session:
        return await session.get(SigningSecret, org_id)


def _check_description(description: str | None) -> None:
    # The API's schema refuses a longer one before it comes here; the console's form does not.
    if description is not None and len(description) > MAX_DESCRIPTION_LENGTH:
        raise InvalidRequest(f"A description has at most {MAX_DESCRIPTION_LENGTH} characters.")


async def _find(session: AsyncSession, org_id: str, webhook_id: str) -> Webhook:
    hook = await repository.find_webhook(session, org_id, webhook_id)
    if hook is None:
        # The same answer for another organization's webhook and an unknown one.
        raise NotFound(f"No webhook with id {webhook_id!r}.")
    return hook
