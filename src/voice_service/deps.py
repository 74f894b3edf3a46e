"""Dependencies shared by the routers: the app context, authentication, service switches."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from voice_service.auth.keys import looks_like_secret
from voice_service.auth.principal import Principal, find_principal
from voice_service.context import AppContext
from voice_service.errors import AccountSuspended, InvalidApiKey, ServiceDisabled

# auto_error=False: a missing header must become our 401 envelope, not FastAPI's 403.
_bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer vs_...`")


def get_context(request: Request) -> AppContext:
    context: AppContext = request.app.state.context
    return context


Context = Annotated[AppContext, Depends(get_context)]


async def authenticate(
    request: Request,
    context: Context,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    if credentials is None or not looks_like_secret(credentials.credentials):
        raise InvalidApiKey()
    async with context.sessions() as session:
        principal = await find_principal(session, context.hasher.hash(credentials.credentials))
    if principal is None:
        raise InvalidApiKey()
    request.state.principal = principal
    if principal.suspended:
        raise AccountSuspended()
    per_minute = principal.rate_limit or context.settings.default_rate_limit
    request.state.quota = await context.limiter.hit(principal.key_id, per_minute)
    return principal


Authenticated = Annotated[Principal, Depends(authenticate)]


def require_service(service: str) -> Callable[[Principal], Awaitable[Principal]]:
    async def check(principal: Authenticated) -> Principal:
        if service in principal.disabled_services:
            raise ServiceDisabled(f"The {service} service is disabled for this organization.")
        return principal

    return check
