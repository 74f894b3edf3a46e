"""A request's ledger (`books/ledger.py`), carried in its ASGI scope from the middleware or
WebSocket upgrade that opens it to the handlers, error handlers and dependencies."""

from __future__ import annotations

from starlette.requests import HTTPConnection
from starlette.types import Scope

from voice_service.books.ledger import Ledger

_SCOPE_KEY = "ledger"


def attach_ledger(scope: Scope, ledger: Ledger) -> None:
    scope.setdefault("state", {})[_SCOPE_KEY] = ledger


def ledger_of(connection: HTTPConnection | Scope) -> Ledger:
    """The ledger opened for this request."""
    scope = connection.scope if isinstance(connection, HTTPConnection) else connection
    ledger = scope["state"][_SCOPE_KEY]
    assert isinstance(ledger, Ledger)
    return ledger
