"""The webhooks page: register one (its signing secret shown once), enable, disable or
delete it; one webhook's page: its recent deliveries, each attempt, and Redeliver. Every
action mirrors its twin in api/webhooks.py, scoped by the organization in the URL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final
from urllib.parse import urlencode

from fastapi import APIRouter, Request, Response
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.datastructures import FormData

from voice_service.console.audit import Action, record_user_action
from voice_service.console.auth import CurrentOrg, PageNotFound, SignedInUser, checked_form
from voice_service.console.pages import CONSOLE_PREFIX, redirect, render
from voice_service.console.security import client_ip
from voice_service.core.errors import InvalidRequest
from voice_service.core.models import Organization, Webhook
from voice_service.core.vocabulary import WebhookEvent
from voice_service.kit.db import transaction
from voice_service.tenancy.console_sessions import SignedIn
from voice_service.web.deps import Context
from voice_service.webhooks import repository
from voice_service.webhooks.service import checked_url, redeliver, webhook_row

router = APIRouter()

# The API's limits (webhooks/schemas.py WebhookIn).
MAX_URL_LENGTH = 2048
MAX_DESCRIPTION_LENGTH = 200
DELIVERIES_SHOWN = 50
EVENTS: Final = tuple(event.value for event in WebhookEvent)
_BADGES: Final = {
    repository.PENDING: "badge badge-warn",
    repository.DELIVERED: "badge badge-ok",
    repository.FAILED: "badge badge-err",
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
    async with context.sessions() as session:
        hooks = await repository.list_webhooks(session, org.id)
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
    request: Request, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    form = await checked_form(request, user)
    url = str(form.get("url", "")).strip()
    description = str(form.get("description", "")).strip()
    chosen = [str(value) for value in form.getlist("events")]
    try:
        events = _events(chosen)
        url = await checked_url(context.settings.outbound_allowed, _url(url))
        if len(description) > MAX_DESCRIPTION_LENGTH:
            raise InvalidRequest(f"A description has at most {MAX_DESCRIPTION_LENGTH} characters.")
    except InvalidRequest as exc:
        shown = {"url": url, "description": description}
        return await _webhooks_page(
            request, context, user, org, status=400, error=exc.message, form=shown, chosen=chosen
        )
    hook = webhook_row(org.id, url, events, description or None)
    hook.created_at = context.books.clock()
    async with transaction(context.sessions) as session:
        session.add(hook)
        record_user_action(
            session, user, Action.WEBHOOK_CREATED, f"{hook.id} in {org.id}", client_ip(request)
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
    async with context.sessions() as session:
        hook = await _find(session, org, webhook_id)
        deliveries = await repository.recent_deliveries(session, hook.id, DELIVERIES_SHOWN)
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
    webhook_id: str, request: Request, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    return await _switch(webhook_id, request, context, user, org, enabled=True)


@router.post("/orgs/{org_id}/webhooks/{webhook_id}/disable")
async def disable_action(
    webhook_id: str, request: Request, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    return await _switch(webhook_id, request, context, user, org, enabled=False)


async def _switch(
    webhook_id: str,
    request: Request,
    context: Context,
    user: SignedIn,
    org: Organization,
    *,
    enabled: bool,
) -> Response:
    form = await checked_form(request, user)
    action = Action.WEBHOOK_ENABLED if enabled else Action.WEBHOOK_DISABLED
    async with transaction(context.sessions) as session:
        hook = await _find(session, org, webhook_id)
        hook.enabled = enabled
        record_user_action(session, user, action, f"{hook.id} in {org.id}", client_ip(request))
    return redirect(_back(org, webhook_id, form))


def _back(org: Organization, webhook_id: str, form: FormData) -> str:
    """The page the form was on: the webhook's own, or the list."""
    url = f"{CONSOLE_PREFIX}/orgs/{org.id}/webhooks"
    return f"{url}/{webhook_id}" if form.get("from") == "webhook" else url


@router.get("/orgs/{org_id}/webhooks/{webhook_id}/delete")
async def delete_page(
    webhook_id: str, request: Request, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    async with context.sessions() as session:
        hook = await _find(session, org, webhook_id)
    return render(request, "webhook_delete.html", user=user, org=org, hook=hook)


@router.post("/orgs/{org_id}/webhooks/{webhook_id}/delete")
async def delete_action(
    webhook_id: str, request: Request, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    await checked_form(request, user)
    async with transaction(context.sessions) as session:
        hook = await _find(session, org, webhook_id)
        await repository.delete_webhook(session, hook.id)
        record_user_action(
            session, user, Action.WEBHOOK_DELETED, f"{hook.id} in {org.id}", client_ip(request)
        )
    return redirect(f"{CONSOLE_PREFIX}/orgs/{org.id}/webhooks")


@router.post("/orgs/{org_id}/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver")
async def redeliver_action(
    webhook_id: str,
    delivery_id: str,
    request: Request,
    context: Context,
    user: SignedInUser,
    org: CurrentOrg,
) -> Response:
    await checked_form(request, user)
    if context.deliveries is None:  # no queue to send it from: the page offers no button
        raise PageNotFound()
    async with transaction(context.sessions) as session:
        hook = await _find(session, org, webhook_id)
        delivery = await repository.find_delivery(session, org.id, delivery_id, webhook_id=hook.id)
        if delivery is None:
            raise PageNotFound()
        await redeliver(session, context.deliveries.queue, delivery)
        record_user_action(
            session,
            user,
            Action.DELIVERY_REDELIVERED,
            f"{delivery.id} of {hook.id} in {org.id}",
            client_ip(request),
        )
    query = urlencode({"redelivered": delivery_id})
    return redirect(f"{CONSOLE_PREFIX}/orgs/{org.id}/webhooks/{hook.id}?{query}")


async def _find(session: AsyncSession, org: Organization, webhook_id: str) -> Webhook:
    hook = await repository.find_webhook(session, org.id, webhook_id)
    if hook is None:  # another organization's webhook is as unknown as one that never was
        raise PageNotFound()
    return hook
