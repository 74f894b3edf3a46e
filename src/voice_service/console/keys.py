"""The API keys page: create a key (its secret shown once), list, revoke."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from voice_service.console.audit import Action, record_user_action
from voice_service.console.auth import CurrentOrg, PageNotFound, SignedInUser, checked_form
from voice_service.console.pages import redirect, render
from voice_service.console.repository import org_key, org_keys
from voice_service.console.security import client_ip
from voice_service.console.sessions import SignedIn
from voice_service.db import transaction
from voice_service.deps import Context
from voice_service.models import Organization
from voice_service.tenancy.rate_limits import InvalidRateLimit, parse_rate_limit
from voice_service.tenancy.service import create_key, revoke_key

router = APIRouter()

MAX_KEY_NAME_LENGTH = 200


@router.get("/orgs/{org_id}/keys")
async def keys_page(
    request: Request, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    return await _keys_page(request, context, user, org)


async def _keys_page(
    request: Request,
    context: Context,
    user: SignedIn,
    org: Organization,
    *,
    status: int = 200,
    new_secret: str | None = None,
    error: str | None = None,
    name: str = "",
) -> Response:
    async with context.sessions() as session:
        keys = await org_keys(session, org.id)
    return render(
        request,
        "keys.html",
        user=user,
        org=org,
        status=status,
        keys=keys,
        new_secret=new_secret,
        error=error,
        name=name,
        default_rate_limit=context.settings.default_rate_limit,
        max_rate_limit=context.settings.key_rate_limit_ceiling,
    )


@router.post("/orgs/{org_id}/keys")
async def create_key_action(
    request: Request, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    form = await checked_form(request, user)
    name = str(form.get("name", "")).strip()
    ceiling = context.settings.key_rate_limit_ceiling
    error, rate_limit = _parse_rate_limit(str(form.get("rate_limit", "")).strip(), ceiling)
    if not name:
        error = "Give the key a name, so that you can tell it apart later."
    elif len(name) > MAX_KEY_NAME_LENGTH:
        error = f"A key name has at most {MAX_KEY_NAME_LENGTH} characters."
    if error is not None:
        return await _keys_page(request, context, user, org, status=400, error=error, name=name)
    async with transaction(context.sessions) as session:
        created = await create_key(session, context.hasher, org.id, name, rate_limit)
        record_user_action(
            session,
            user,
            Action.KEY_CREATED,
            f"{created.key.id} ({created.key.prefix}…) in {org.id}",
            client_ip(request),
        )
    # Shown in this response only: nothing keeps the secret, a reload shows the prefix.
    return await _keys_page(request, context, user, org, new_secret=created.secret)


def _parse_rate_limit(value: str, ceiling: int) -> tuple[str | None, int | None]:
    if not value:
        return None, None
    try:
        rate_limit = parse_rate_limit(value)
    except InvalidRateLimit:
        rate_limit = None
    if rate_limit is None or rate_limit > ceiling:
        return f"The rate limit is a whole number of requests per minute, 1 to {ceiling}.", None
    return None, rate_limit


@router.get("/orgs/{org_id}/keys/{key_id}/revoke")
async def revoke_page(
    key_id: str, request: Request, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    async with context.sessions() as session:
        key = await org_key(session, org.id, key_id)
    if key is None:
        raise PageNotFound()
    return render(request, "key_revoke.html", user=user, org=org, key=key)


@router.post("/orgs/{org_id}/keys/{key_id}/revoke")
async def revoke_action(
    key_id: str, request: Request, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    await checked_form(request, user)
    async with transaction(context.sessions) as session:
        # Scoped by the organization first: a key id from elsewhere is simply not found.
        if await org_key(session, org.id, key_id) is None:
            raise PageNotFound()
        key = await revoke_key(session, key_id)
        record_user_action(
            session,
            user,
            Action.KEY_REVOKED,
            f"{key.id} ({key.prefix}…) in {org.id}",
            client_ip(request),
        )
    return redirect(f"/console/orgs/{org.id}/keys")
