"""Who is using the console: the session cookie resolved to a user, and the organization
in the URL resolved within that user's account."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from starlette.datastructures import FormData

from voice_service.accounts.organizations import org_for
from voice_service.accounts.sign_in import signed_in_user
from voice_service.console.security import SESSION_COOKIE, check_csrf, client_ip
from voice_service.core.models import Organization
from voice_service.tenancy.audit import Actor
from voice_service.tenancy.console_sessions import SignedIn
from voice_service.web.deps import Context

MAX_FORM_FIELDS = 16
MAX_FORM_FIELD_BYTES = 64 * 1024


class SignInRequired(Exception):
    """No live session: the browser is sent to the sign-in page."""


class PageNotFound(Exception):
    """An unknown page, or another account's organization: the same 404 for both."""


async def signed_in(request: Request, context: Context) -> SignedIn:
    token = request.cookies.get(SESSION_COOKIE)
    if not token:
        raise SignInRequired()
    user = await signed_in_user(context, token)
    if user is None:
        raise SignInRequired()
    return user


SignedInUser = Annotated[SignedIn, Depends(signed_in)]


async def current_org(org_id: str, user: SignedInUser, context: Context) -> Organization:
    org = await org_for(context, user, org_id)
    if org is None:
        raise PageNotFound()
    return org


CurrentOrg = Annotated[Organization, Depends(current_org)]


async def acting_user(request: Request, user: SignedInUser) -> Actor:
    return Actor(user, client_ip(request))


# The signed-in user as the audit log records a change they make: with their address.
ActingUser = Annotated[Actor, Depends(acting_user)]


async def checked_form(request: Request, user: SignedIn) -> FormData:
    """A posted url-encoded form, refused unless it carries the session's CSRF token."""
    form = await request.form(max_fields=MAX_FORM_FIELDS, max_part_size=MAX_FORM_FIELD_BYTES)
    check_csrf(request, user.csrf_token, form.get("csrf_token"))
    return form
