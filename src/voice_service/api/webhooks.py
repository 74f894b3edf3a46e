"""/webhooks: where an organization's events are delivered, and how each delivery went."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Query, Response
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.errors import NotFound
from voice_service.core.models import SigningSecret, Webhook
from voice_service.core.vocabulary import Scope
from voice_service.kit.db import transaction
from voice_service.tenancy.principal import Principal
from voice_service.web.deps import Context, require
from voice_service.web.schemas import error_responses
from voice_service.webhooks import repository
from voice_service.webhooks.schemas import (
    DeliveryList,
    DeliveryOut,
    SigningSecretCreated,
    SigningSecretOut,
    WebhookCreated,
    WebhookIn,
    WebhookList,
    WebhookOut,
    WebhookPatch,
)
from voice_service.webhooks.service import (
    checked_url,
    redeliver,
    rotate_signing_secret,
    webhook_row,
)

router = APIRouter(tags=["webhooks"])

Manager = Annotated[Principal, Depends(require(Scope.WEBHOOKS))]
WebhookId = Annotated[
    str, Path(openapi_examples={"a webhook": {"value": "wh_5e1a9c3b7d2f4e6a8b0c1d2e"}})
]
DeliveryId = Annotated[str, Path(openapi_examples={"a delivery": {"value": "msg_..."}})]


@router.post(
    "/webhooks",
    summary="Register a webhook (its signing secret is in this answer only)",
    status_code=201,
    response_model=WebhookCreated,
    responses=error_responses(400),
)
async def create_webhook(
    body: Annotated[
        WebhookIn,
        Body(
            openapi_examples={
                "jobs ending": {
                    "value": {
                        "url": "https://example.com/hooks/voice",
                        "events": ["transcription.completed", "transcription.failed"],
                    }
                }
            }
        ),
    ],
    context: Context,
    principal: Manager,
) -> WebhookCreated:
    url = await checked_url(context.settings.outbound_allowed, body.url)
    hook = webhook_row(
        principal.org_id, url, list(dict.fromkeys(e.value for e in body.events)), body.description
    )
    hook.created_at = context.books.clock()
    async with transaction(context.sessions) as session:
        session.add(hook)
    return WebhookCreated(**WebhookOut.of(hook).model_dump(), secret=hook.secret)


@router.post(
    "/webhooks/signing-secret",
    summary="Create, or rotate, the organization's signing secret for jobs' own webhook_url "
    "(shown in this answer only)",
    status_code=201,
    response_model=SigningSecretCreated,
    responses=error_responses(),
)
async def rotate_secret(context: Context, principal: Manager) -> SigningSecretCreated:
    async with transaction(context.sessions) as session:
        found = await rotate_signing_secret(session, principal.org_id, context.books.clock())
        return SigningSecretCreated(**SigningSecretOut.of(found).model_dump(), secret=found.secret)


@router.get(
    "/webhooks/signing-secret",
    summary="When the organization's signing secret was made (not the secret)",
    response_model=SigningSecretOut,
    responses=error_responses(404),
)
async def get_secret(context: Context, principal: Manager) -> SigningSecretOut:
    async with context.sessions() as session:
        found = await session.get(SigningSecret, principal.org_id)
    if found is None:
        raise NotFound("The organization has no signing secret; POST one.")
    return SigningSecretOut.of(found)


@router.get(
    "/webhooks",
    summary="The organization's webhooks",
    response_model=WebhookList,
    responses=error_responses(),
)
async def list_webhooks(context: Context, principal: Manager) -> WebhookList:
    async with context.sessions() as session:
        hooks = await repository.list_webhooks(session, principal.org_id)
    return WebhookList(webhooks=[WebhookOut.of(hook) for hook in hooks])


@router.get(
    "/webhooks/{webhook_id}",
    summary="One webhook",
    response_model=WebhookOut,
    responses=error_responses(404),
)
async def get_webhook(webhook_id: WebhookId, context: Context, principal: Manager) -> WebhookOut:
    async with context.sessions() as session:
        return WebhookOut.of(await _find(session, principal, webhook_id))


@router.patch(
    "/webhooks/{webhook_id}",
    summary="Change a webhook's URL or events, or enable or disable it",
    response_model=WebhookOut,
    responses=error_responses(400, 404),
)
async def update_webhook(
    webhook_id: WebhookId,
    body: Annotated[
        WebhookPatch, Body(openapi_examples={"disable it": {"value": {"enabled": False}}})
    ],
    context: Context,
    principal: Manager,
) -> WebhookOut:
    allowed = context.settings.outbound_allowed
    url = await checked_url(allowed, body.url) if body.url is not None else None
    async with transaction(context.sessions) as session:
        hook = await _find(session, principal, webhook_id)
        if url is not None:
            hook.url = url
        if body.events is not None:
            hook.events = list(dict.fromkeys(e.value for e in body.events))
        if body.description is not None:
            hook.description = body.description
        if body.enabled is not None:
            hook.enabled = body.enabled
        return WebhookOut.of(hook)


@router.delete(
    "/webhooks/{webhook_id}",
    summary="Delete a webhook and its deliveries",
    status_code=204,
    responses=error_responses(404),
)
async def delete_webhook(webhook_id: WebhookId, context: Context, principal: Manager) -> Response:
    async with transaction(context.sessions) as session:
        await _find(session, principal, webhook_id)
        await repository.delete_webhook(session, webhook_id)
    return Response(status_code=204)


@router.get(
    "/webhooks/{webhook_id}/deliveries",
    summary="A webhook's deliveries, newest first, each with its attempts",
    response_model=DeliveryList,
    responses=error_responses(400, 404),
)
async def list_deliveries(
    webhook_id: WebhookId,
    context: Context,
    principal: Manager,
    limit: Annotated[int, Query(ge=1, le=200, description="Deliveries to list.")] = 50,
) -> DeliveryList:
    async with context.sessions() as session:
        await _find(session, principal, webhook_id)
        found = await repository.recent_deliveries(session, webhook_id, limit)
    return DeliveryList(deliveries=[DeliveryOut.of(d, attempts) for d, attempts in found])


@router.post(
    "/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver",
    summary="Send a delivery again (with its retries, should it fail)",
    status_code=202,
    response_model=DeliveryOut,
    responses=error_responses(404),
)
async def redeliver_one(
    webhook_id: WebhookId,
    delivery_id: DeliveryId,
    context: Context,
    principal: Manager,
) -> DeliveryOut:
    assert context.deliveries is not None
    async with transaction(context.sessions) as session:
        await _find(session, principal, webhook_id)
        delivery = await repository.find_delivery(
            session, principal.org_id, delivery_id, webhook_id=webhook_id
        )
        if delivery is None:
            raise NotFound(f"No delivery with id {delivery_id!r} of this webhook.")
        await redeliver(session, context.deliveries.queue, delivery)
        return DeliveryOut.of(*await repository.with_attempts(session, delivery))


async def _find(session: AsyncSession, principal: Principal, webhook_id: str) -> Webhook:
    hook = await repository.find_webhook(session, principal.org_id, webhook_id)
    if hook is None:
        # The same answer for another organization's webhook and an unknown one.
        raise NotFound(f"No webhook with id {webhook_id!r}.")
    return hook
