"""A WebSocket session as one request: checked before it is accepted, logged and billed
once when it ends.

The upgrade is a request like any other until it is accepted: the key is checked (401,
403, 429 answered before upgrading, in the shape of the path's API: the middleware sees
only HTTP, so the session opens its own ledger), the session counted against the key's
limit of open sessions, and the request logged once, when the session ends, with status
101. Whatever ends it, the session bills what it used (`Ledger.session_ended`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from fastapi import WebSocket
from starlette.responses import Response
from starlette.types import Message
from starlette.websockets import WebSocketDisconnect, WebSocketState

from voice_service.auth.principal import Principal
from voice_service.context import AppContext
from voice_service.deps import authenticate_secret, check_scope
from voice_service.errors import ApiError, ProviderError, RateLimited, envelope_bytes
from voice_service.ledger import Ledger, log_failure
from voice_service.realtime.open_sessions import open_session
from voice_service.usage.charge import Charge
from voice_service.vocabulary import Scope, Service

logger = logging.getLogger(__name__)

T = TypeVar("T")

# The share of its drain timeout a stopping node gives a session to finish what it took
# (the rest is for closing it, logging and billing).
FINISH_SHARE = 0.5


class Channel:
    """The accepted WebSocket, for sending: JSON messages, one at a time (the session's
    tasks send concurrently), counted; a client gone makes sending a no-op."""

    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket
        self.bytes_sent = 0
        self._lock = asyncio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        async with self._lock:
            if self.websocket.application_state is not WebSocketState.CONNECTED:
                return
            with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
                await self.websocket.send_text(text)
                self.bytes_sent += len(text)

    async def close(self, code: int, reason: str) -> None:
        async with self._lock:
            with contextlib.suppress(RuntimeError, OSError):
                await self.websocket.close(code, reason)


@dataclass(frozen=True, slots=True)
class Session:
    context: AppContext
    ledger: Ledger
    principal: Principal
    channel: Channel


async def serve_session(
    websocket: WebSocket,
    scope: Scope,
    service: Service,
    endpoint: str,
    prepare: Callable[[AppContext, Principal], Awaitable[T]],
    run: Callable[[Session, T], Awaitable[None]],
) -> None:
    """Check the upgrade (`prepare` adds the endpoint's own checks and finds what the
    session needs), accept it, and `run` the session, which ends by telling the ledger
    what it used. A session that fails unexpectedly is logged and bills nothing."""
    context: AppContext = websocket.app.state.context
    ledger = Ledger(context.books, "GET", websocket.url.path)
    ledger.attach(websocket.scope)
    channel = Channel(websocket)
    try:
        principal = await authenticate_secret(websocket, context, _secret(websocket))
        check_scope(principal, scope, service)
        prepared = await prepare(context, principal)
        limit = context.settings.max_realtime_sessions_per_key
        place = open_session(
            context.books.sessions, principal, ledger.request_id, limit, context.books.clock
        )
        async with place:
            await ledger.hold(1)  # a capped key with nothing left is refused here
            await websocket.accept(headers=[(b"x-request-id", ledger.request_id.encode())])
            ledger.stream_starting()
            await run(Session(context, ledger, principal, channel), prepared)
    except Exception as exc:
        if websocket.application_state is WebSocketState.CONNECTING:  # not accepted yet
            if not isinstance(exc, ApiError):
                log_failure(ledger.request_id, exc)
            error = exc if isinstance(exc, ApiError) else ProviderError()
            await _deny(websocket, ledger, error)
        elif not ledger.settled:
            log_failure(ledger.request_id, exc)
            await ledger.stream_ended(Charge(endpoint, 0), ProviderError(), channel.bytes_sent)
            await channel.close(1011, "internal error")


async def next_message(
    websocket: WebSocket,
    ends_at: float,
    idle: float,
    busy: Callable[[], bool],
    stopping: asyncio.Event,
) -> Message | Literal["expired", "idle", "stopping"]:
    """The client's next message; or why the session ends first: its time (`ends_at`, on
    `time.monotonic()`) is up, the client sent nothing for `idle` seconds while the session
    was not `busy` (waiting on the node is not idleness), or the node is `stopping`."""
    while True:
        if stopping.is_set():
            return "stopping"
        left = ends_at - time.monotonic()
        receiving = asyncio.ensure_future(websocket.receive())
        stopped = asyncio.ensure_future(stopping.wait())
        try:
            done, _ = await asyncio.wait(
                {receiving, stopped},
                timeout=min(idle, max(0.0, left)),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            stopped.cancel()
            receiving.cancel()  # a message not yet taken stays in the connection's queue
        if receiving in done:
            return receiving.result()
        if stopped in done:
            return "stopping"
        if time.monotonic() >= ends_at:
            return "expired"
        if not busy():
            return "idle"


class UnitGate:
    """Under a monthly cap, a session holds its units before it takes what they pay for,
    `ahead` more at a time (or what is left of the cap): `RateLimited` once none is left.
    Without a cap it does nothing."""

    def __init__(self, ledger: Ledger, ahead: int) -> None:
        self._ledger = ledger
        self._ahead = ahead
        self._open = not ledger.capped

    async def __call__(self, units: int) -> None:
        """Hold `units` in all (what the session will have used)."""
        if self._open or units <= self._ledger.units_held:
            return
        try:
            await self._ledger.hold(units + self._ahead)
        except RateLimited:
            await self._ledger.hold(units)
        self._open = self._ledger.units_held == 0  # the cap was lifted meanwhile


def _secret(websocket: WebSocket) -> str | None:
    """The key: `Authorization: Bearer`, or ElevenLabs' `xi-api-key` header, which
    ElevenLabs' clients send."""
    scheme, _, secret = websocket.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer":
        return secret.strip()
    return websocket.headers.get("xi-api-key")


async def _deny(websocket: WebSocket, ledger: Ledger, error: ApiError) -> None:
    """Refuse the upgrade with an HTTP answer, as any other request's error."""
    await ledger.refused(error)
    body = envelope_bytes(error, ledger.request_id, websocket.url.path)
    headers = {**error.headers, "X-Request-ID": ledger.request_id}
    response = Response(body, error.status, headers, media_type="application/json")
    with contextlib.suppress(OSError, RuntimeError):  # the client left while being refused
        await websocket.send_denial_response(response)
