"""The API keys page: create a key (its secret shown once), list, revoke."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, Request, Response

from voice_service.accounts.keys import (
    api_keys,
    create_api_key,
    find_api_key,
    revoke_api_key,
)
from voice_service.console.auth import (
    ActingUser,
    CurrentOrg,
    PageNotFound,
    SignedInUser,
    checked_form,
)
from voice_service.console.pages import redirect, render
from voice_service.core.models import Organization
from voice_service.core.vocabulary import Scope
from voice_service.tenancy.console_sessions import SignedIn
from voice_service.tenancy.rate_limits import (
    InvalidRateLimit,
    InvalidUnitCap,
    parse_rate_limit,
    parse_unit_cap,
)
from voice_service.web.deps import Context

router = APIRouter()

MAX_KEY_NAME_LENGTH = 200
ALL_SCOPES = tuple(scope.value for scope in Scope)
SCOPES_OFFERED = "scopes_offered"  # a hidden field of the form


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
    chosen: Sequence[str] = ALL_SCOPES,
) -> Response:
    keys = await api_keys(context, org.id)
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
        scopes=ALL_SCOPES,
        scopes_offered=SCOPES_OFFERED,
        chosen=chosen,
        default_rate_limit=context.settings.default_rate_limit,
        max_rate_limit=context.settings.key_rate_limit_ceiling,
    )


@router.post("/orgs/{org_id}/keys")
async def create_key_action(
    request: Request, context: Context, user: SignedInUser, org: CurrentOrg, actor: ActingUser
) -> Response:
    form = await checked_form(request, user)
    name = str(form.get("name", "")).strip()
    ceiling = context.settings.key_rate_limit_ceiling
    error, rate_limit = _parse_rate_limit(str(form.get("rate_limit", "")).strip(), ceiling)
    cap_error, monthly_units = _parse_monthly_units(str(form.get("monthly_units", "")).strip())
    # The form marks that it offered the scopes: all unchecked is then a mistake, where a
    # form without them (a script's) means every scope.
    offered = SCOPES_OFFERED in form
    chosen = [str(value) for value in form.getlist("scopes")] if offered else list(ALL_SCOPES)
    error = error or cap_error
    if not name:
        error = "Give the key a name, so that you can tell it apart later."
    elif len(name) > MAX_KEY_NAME_LENGTH:
        error = f"A key name has at most {MAX_KEY_NAME_LENGTH} characters."
    elif not chosen or not set(chosen) <= set(ALL_SCOPES):
        error = "Choose what the key may do: at least one of the scopes."
    if error is not None:
        return await _keys_page(
            request, context, user, org, status=400, error=error, name=name, chosen=chosen
        )
    # Every scope chosen: a key that may do everything, scopes added later included.
    scopes = None if set(chosen) == set(ALL_SCOPES) else [Scope(value) for value in chosen]
    created = await create_api_key(
        context,
        context.hasher,
        org.id,
        name,
        rate_limit,
        scopes=scopes,
        monthly_units=monthly_units,
        actor=actor,
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


def _parse_monthly_units(value: str) -> tuple[str | None, int | None]:
    if not value:
        return None, None
    try:
        return None, parse_unit_cap(value)
    except InvalidUnitCap:
        return "The monthly cap is a whole number of units, or empty for none.", None


@router.get("/orgs/{org_id}/keys/{key_id}/revoke")
async def revoke_page(
    key_id: str, request: Request, context: Context, user: SignedInUser, org: CurrentOrg
) -> Response:
    key = await find_api_key(context, org.id, key_id)
    if key is None:
        raise PageNotFound()
    return render(request, "key_revoke.html", user=user, org=org, key=key)


@router.post("/orgs/{org_id}/keys/{key_id}/revoke")
async def revoke_action(
    key_id: str, request: Request, context: Context, org: CurrentOrg, actor: ActingUser
) -> Response:
    await checked_form(request, actor.user)
    if await revoke_api_key(context, org.id, key_id, actor) is None:
        raise PageNotFound()
    return redirect(f"/console/orgs/{org.id}/keys")
