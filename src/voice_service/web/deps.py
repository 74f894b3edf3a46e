"""Dependencies shared by the routers: the app context, authentication, service switches."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.requests import HTTPConnection

from voice_service.books.idempotency.keys import HEADER as IDEMPOTENCY_HEADER
from voice_service.books.ledger import Ledger
from voice_service.core.errors import AccountSuspended, InvalidApiKey, ServiceDisabled
from voice_service.core.vocabulary import Scope, Service
from voice_service.tenancy.keys import looks_like_secret
from voice_service.tenancy.principal import Principal, principal_of_secret
from voice_service.web.context import AppContext
from voice_service.web.idempotency import claim_idempotency_key
from voice_service.web.ledgers import ledger_of

# auto_error=False: a missing header must become our 401 envelope, not FastAPI's 403.
_bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer vs_...`")


async def get_context(request: Request) -> AppContext:
    # async: FastAPI runs a plain `def` dependency in a worker thread, on every request.
    context: AppContext = request.app.state.context
    return context


Context = Annotated[AppContext, Depends(get_context)]


Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


async def authenticate(request: Request, context: Context, credentials: Credentials) -> Principal:
    secret = credentials.credentials if credentials is not None else None
    return await authenticate_secret(request, context, secret)


async def authenticate_secret(
    connection: HTTPConnection, context: AppContext, secret: str | None
) -> Principal:
    """The key whose secret the caller gave, admitted (see `admit`); a WebSocket's upgrade
    comes here too, before it is accepted."""
    if secret is None or not looks_like_secret(secret):
        raise InvalidApiKey()
    secret_hash = context.hasher.hash(secret)

    principal = await context.principals.get(
        secret_hash, lambda: principal_of_secret(context.sessions, secret_hash)
    )
    if principal is None:
        raise InvalidApiKey()
    await admit(connection, context, principal)
    return principal


async def admit(connection: HTTPConnection, context: AppContext, principal: Principal) -> None:
    """Let a resolved key's request in: it is logged as its organization's from here on,
    refused while the organization or account is suspended, and counted against its rate
    limit. The console's requests for a user come through here too (console/acting.py)."""
    await admit_to(ledger_of(connection), context, principal)


async def admit_to(ledger: Ledger, context: AppContext, principal: Principal) -> None:
    """`admit` for a request outside HTTP (a Wyoming request), whose ledger is its own."""
    ledger.admit(principal)
    if principal.suspended:
        raise AccountSuspended()
    per_minute = principal.rate_limit or context.settings.default_rate_limit
    ledger.quota = await context.limiter.hit(principal.key_id, per_minute)


def check_service(principal: Principal, service: str) -> None:
    message = principal.disabled_message(service)
    if message is not None:
        raise ServiceDisabled(message)


Authenticated = Annotated[Principal, Depends(authenticate)]


def require(
    scope: Scope, service: Service | None = None
) -> Callable[[Request, AppContext, HTTPAuthorizationCredentials | None], Awaitable[Principal]]:
    """The caller's key, if it has `scope` and `service` is not disabled for it."""

    # One dependency, not one on top of `Authenticated`: each level costs every request.
    async def check(request: Request, context: Context, credentials: Credentials) -> Principal:
        principal = await authenticate(request, context, credentials)
        check_scope(principal, scope, service)
        return principal

    return check


def check_scope(principal: Principal, scope: Scope, service: Service | None = None) -> None:
    """Refuse a key without `scope`, or whose `service` is disabled."""
    message = principal.missing_scope_message(scope)
    if message is not None:
        raise ServiceDisabled(message)
    if service is not None:
        check_service(principal, service)


Speaker = Annotated[Principal, Depends(require(Scope.TEXT_TO_SPEECH, Service.TEXT_TO_SPEECH))]
VoicesReader = Annotated[Principal, Depends(require(Scope.VOICES_READ))]
UsageReader = Annotated[Principal, Depends(require(Scope.USAGE_READ))]


async def get_ledger(request: Request) -> Ledger:
    return ledger_of(request)


RequestLedger = Annotated[Ledger, Depends(get_ledger)]


async def idempotency_key(
    request: Request,
    context: Context,
    ledger: RequestLedger,
    key: Annotated[
        str | None,
        Header(
            alias=IDEMPOTENCY_HEADER,
            description="1 to 255 printable ASCII characters. The same key with the same "
            "request within 24 h gets the first answer again (Idempotent-Replayed: true), "
            "billed once; with another request, 400.",
        ),
    ] = None,
) -> None:
    if key is not None:
        assert ledger.principal is not None, "declared after the route's key check"
        await claim_idempotency_key(request, context, ledger, key)


# Declared after a route's key check (dependencies resolve in order): claims the request's
# Idempotency-Key, or answers with the key's stored answer.
IdempotencyKey = Annotated[None, Depends(idempotency_key)]
