"""The webhooks page: register one (its signing secret shown once), enable, disable or
delete it; one webhook's page: its recent deliveries, each attempt, and Redeliver. Every
action is its twin's in api/webhooks.py (webhooks/endpoints.py), scoped by the organization
in the URL."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Final, TypeVar
from urllib.parse import urlencode

from fastapi import APIRouter, Request, Response
from starlette.datastructures import FormData

from voice_service.console.auth import (
    ActingUser,
    CurrentOrg,
    PageNotFound,
    SignedInUser,
    checked_form,
)
from voice_service.console.pages import CONSOLE_PREFIX, redirect, render
from voice_service.core.errors import InvalidRequest, NotFound
from voice_service.core.models import Organization
from voice_service.core.vocabulary import WebhookEvent
from voice_service.tenancy.audit import Actor
from voice_service.tenancy.console_sessions import SignedIn
from voice_service.web.deps import Context
from voice_service.webhooks import endpoints
from voice_service.webhooks.schemas import (
    DELIVERED,
    FAILED,
    MAX_DESCRIPTION_LENGTH,
    MAX_URL_LENGTH,
    PENDING,
)

router = APIRouter()
T = TypeVar("T")

DELIVERIES_SHOWN = 50
EVENTS: Final = tuple(event.value for event in WebhookEvent)
_BADGES: Final = {
    PENDING: "badge badge-warn",
    DELIVERED: "badge badge-ok",
    FAILED: "badge badge-err",
}


@router.get("/orgs/{org_id}/webhooks")
async def webhooks_page(
    request: Request, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    return await _webhooks_page(request, context, user, org)


async def _webhooks_page(
    request: Request,
    context: Context,
    user: SignedIn,
    org: Organization,
    *,
    status: int = 200,
    error: str | None = None,
    new_secret: str | None = None,
    form: dict[str, str] | None = None,
    chosen: Sequence[str] = EVENTS,
) -> Response:
    hooks = await endpoints.list_webhooks(context, org.id)
    return render(
        request,
        "webhooks.html",
        user=user,
        org=org,
        status=status,
        error=error,
        new_secret=new_secret,
        hooks=hooks,
        form=form or {},
        events=EVENTS,
        chosen=chosen,
        max_url=MAX_URL_LENGTH,
        max_description=MAX_DESCRIPTION_LENGTH,
    )


@router.post("/orgs/{org_id}/webhooks")
async def create_action(
    request: Request, context: Context, user: SignedInUser, org: CurrentOrg, actor: ActingUser
) -> Response:
    form = await checked_form(request, user)
    url = str(form.get("url", "")).strip()
    description = str(form.get("description", "")).strip()
    chosen = [str(value) for value in form.getlist("events")]
    try:
        events = _events(chosen)
        hook = await endpoints.create_webhook(
            context,
            org.id,
            _url(url),
            events,
            description or None,
            actor=actor,
        )
    except InvalidRequest as exc:
        shown = {"url": url, "description": description}
        return await _webhooks_page(
            request, context, user, org, status=400, error=exc.message, form=shown, chosen=chosen
        )
    # Shown in this response only: a reload (a GET, see console.js) lists the webhook alone.
    return await _webhooks_page(request, context, user, org, new_secret=hook.secret)


def _url(url: str) -> str:
    if not url:
        raise InvalidRequest("Give the URL that deliveries are sent to.")
    if len(url) > MAX_URL_LENGTH:
        raise InvalidRequest(f"A URL has at most {MAX_URL_LENGTH} characters.")
    return url


def _events(chosen: Sequence[str]) -> list[str]:
    if not chosen or not set(chosen) <= set(EVENTS):
        raise InvalidRequest("Choose what to be told of: at least one of the events.")
    return [event for event in EVENTS if event in chosen]  # in the vocabulary's order, once


@router.get("/orgs/{org_id}/webhooks/{webhook_id}")
async def webhook_page(
    webhook_id: str,
    request: Request,
    context: Context,
    user: SignedInUser,
    org: CurrentOrg,
    redelivered: str = "",
) -> Response:
    """`redelivered` names the delivery just sent again (the Redeliver form's redirect)."""
    hook, deliveries = await _found(
        endpoints.webhook_deliveries(context, org.id, webhook_id, DELIVERIES_SHOWN)
    )
    shown = any(delivery.id == redelivered for delivery, _ in deliveries)
    return render(
        request,
        "webhook.html",
        user=user,
        org=org,
        hook=hook,
        deliveries=deliveries,
        badges=_BADGES,
        can_redeliver=context.deliveries is not None,
        notice=f"Delivery {redelivered} queued to be sent again." if shown else None,
        shown=DELIVERIES_SHOWN,
    )


@router.post("/orgs/{org_id}/webhooks/{webhook_id}/enable")
async def enable_action(
    webhook_id: str, request: Request, context: Context, actor: ActingUser, org: CurrentOrg
) -> Response:
    return await _switch(webhook_id, request, context, actor, org, enabled=True)


@router.post("/orgs/{org_id}/webhooks/{webhook_id}/disable")
async def disable_action(
    webhook_id: str, request: Request, context: Context, actor: ActingUser, org: CurrentOrg
) -> Response:
    return await _switch(webhook_id, request, context, actor, org, enabled=False)


async def _switch(
    webhook_id: str,
    request: Request,
    context: Context,
    actor: Actor,
    org: Organization,
    *,
    enabled: bool,
) -> Response:
    form = await checked_form(request, actor.user)
    await _found(
        endpoints.update_webhook(context, org.id, webhook_id, enabled=enabled, actor=actor)
    )
    return redirect(_back(org, webhook_id, form))


def _back(org: Organization, webhook_id: str, form: FormData) -> str:
    """The page the form was on: the webhook's own, or the list."""
    url = f"{CONSOLE_PREFIX}/orgs/{org.id}/webhooks"
    return f"{url}/{webhook_id}" if form.get("from") == "webhook" else url


@router.get("/orgs/{org_id}/webhooks/{webhook_id}/delete")
async def delete_page(
    webhook_id: str, request: Request, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    hook = await _found(endpoints.get_webhook(context, org.id, webhook_id))
    return render(request, "webhook_delete.html", user=user, org=org, hook=hook)


@router.post("/orgs/{org_id}/webhooks/{webhook_id}/delete")
async def delete_action(
    webhook_id: str, request: Request, context: Context, org: CurrentOrg, actor: ActingUser
) -> Response:
    await checked_form(request, actor.user)
    await _found(endpoints.delete_webhook(context, org.id, webhook_id, actor=actor))
    return redirect(f"{CONSOLE_PREFIX}/orgs/{org.id}/webhooks")


@router.post("/orgs/{org_id}/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver")
async def redeliver_action(
    webhook_id: str,
    delivery_id: str,
    request: Request,
    context: Context,
    org: CurrentOrg,
    actor: ActingUser,
) -> Response:
    await checked_form(request, actor.user)
    if context.deliveries is None:  # no queue to send it from: the page offers no button
        raise PageNotFound()
    queue = context.deliveries.queue
    await _found(
        endpoints.redeliver_delivery(context, queue, org.id, webhook_id, delivery_id, actor=actor)
    )
    query = urlencode({"redelivered": delivery_id})
    return redirect(f"{CONSOLE_PREFIX}/orgs/{org.id}/webhooks/{webhook_id}?{query}")


async def _found(work: Awaitable[T]) -> T:
    """What `work` finds; another organization's webhook or delivery is as unknown as one
    that never was: the console's own 404 page."""
    try:
        return await work
    except NotFound:
        raise PageNotFound() from None
