"""A Wyoming request as the bound key's request: one request-log row, its rate limit, its
scopes, its caps and its bill, as the HTTP endpoints would have them.

Wyoming carries no credentials: the operator binds each listener to one API key by its id,
and every request on it is that key's. The key is read again for each request (one row),
so a key revoked, or an organization suspended, is refused from its next request on.
"""

from __future__ import annotations

from enum import StrEnum

from voice_service.books.ledger import Ledger
from voice_service.core.errors import InvalidApiKey
from voice_service.core.vocabulary import Scope, Service
from voice_service.tenancy.principal import Principal, principal_of_key
from voice_service.web.context import AppContext
from voice_service.web.deps import admit_to, check_scope

# The request log's method for every Wyoming request: its path says which.
METHOD = "WYOMING"


class WyomingPath(StrEnum):
    """What each kind of Wyoming request is logged as (and counted as in /metrics)."""

    DESCRIBE = "/wyoming/describe"
    SYNTHESIZE = "/wyoming/synthesize"
    SYNTHESIZE_STREAM = "/wyoming/synthesize-stream"
    TRANSCRIBE = "/wyoming/transcribe"


def new_ledger(context: AppContext, path: WyomingPath) -> Ledger:
    return Ledger(context.books, METHOD, path)


async def admitted(
    context: AppContext,
    ledger: Ledger,
    key_id: str,
    needs: tuple[Scope, Service] | None = None,
) -> Principal:
    """The listener's key, let in as an HTTP request's would be (suspension, rate limit)
    and holding `needs`' scope and service; raises the `ApiError` that refuses it."""
    principal = await principal_of_key(context.sessions, key_id)
    if principal is None:
        raise InvalidApiKey(
            "The API key this Wyoming listener is bound to was revoked, or does not exist."
        )
    await admit_to(ledger, context, principal)
    if needs is not None:
        check_scope(principal, *needs)
    return principal
