"""/webhooks: where an organization's events are delivered, and how each delivery went."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Query, Response

from voice_service.core.vocabulary import Scope
from voice_service.tenancy.principal import Principal
from voice_service.web.deps import Context, require
from voice_service.web.schemas import error_responses
from voice_service.webhooks import endpoints
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
    events = [event.value for event in body.events]
    hook = await endpoints.create_webhook(
        context, principal.org_id, body.url, events, body.description
    )
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
    found = await endpoints.new_signing_secret(context, principal.org_id)
    return SigningSecretCreated(**SigningSecretOut.of(found).model_dump(), secret=found.secret)


@router.get(
    "/webhooks/signing-secret",
    summary="When the organization's signing secret was made (not the secret)",
    response_model=SigningSecretOut,
    responses=error_responses(404),
)
async def get_secret(context: Context, principal: Manager) -> SigningSecretOut:
    return SigningSecretOut.of(await endpoints.get_signing_secret(context, principal.org_id))


@router.get(
    "/webhooks",
    summary="The organization's webhooks",
    response_model=WebhookList,
    responses=error_responses(),
)
async def list_webhooks(context: Context, principal: Manager) -> WebhookList:
    hooks = await endpoints.list_webhooks(context, principal.org_id)
    return WebhookList(webhooks=[WebhookOut.of(hook) for hook in hooks])


@router.get(
    "/webhooks/{webhook_id}",
    summary="One webhook",
    response_model=WebhookOut,
    responses=error_responses(404),
)
async def get_webhook(webhook_id: WebhookId, context: Context, principal: Manager) -> WebhookOut:
    return WebhookOut.of(await endpoints.get_webhook(context, principal.org_id, webhook_id))


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
    events = None if body.events is None else [event.value for event in body.events]
    hook = await endpoints.update_webhook(
        context,
        principal.org_id,
        webhook_id,
        url=body.url,
        events=events,
        description=body.description,
        enabled=body.enabled,
    )
    return WebhookOut.of(hook)


@router.delete(
    "/webhooks/{webhook_id}",
    summary="Delete a webhook and its deliveries",
    status_code=204,
    responses=error_responses(404),
)
async def delete_webhook(webhook_id: WebhookId, context: Context, principal: Manager) -> Response:
    await endpoints.delete_webhook(context, principal.org_id, webhook_id)
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
    _, found = await endpoints.webhook_deliveries(context, principal.org_id, webhook_id, limit)
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
    found = await endpoints.redeliver_delivery(
        context, context.deliveries.queue, principal.org_id, webhook_id, delivery_id
    )
    return DeliveryOut.of(*found)
