"""A WebSocket session as one request: checked before it is accepted, logged and billed
once when it ends.

The upgrade is a request like any other until it is accepted: the key is checked (401,
403, 429 answered before upgrading, in the shape of the path's API: the middleware sees
only HTTP, so the session opens its own ledger), the session counted against the key's
limit of open sessions, and the request logged once, when the session ends, with status
101. Whatever ends it, the session bills what it delivered (`Ledger.session_ended`). While
it runs its key is looked at again whenever tenancy changes: revoked, suspended or no longer
allowed the service, the session is cut off (`web.key_watch`) within a second of the change.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, overload

from fastapi import WebSocket
from starlette.responses import Response
from starlette.types import Message
from starlette.websockets import WebSocketDisconnect, WebSocketState

from voice_service.books.ledger import Ledger, log_failure
from voice_service.books.usage.charge import Charge
from voice_service.core.errors import ApiError, ProviderError, envelope_bytes
from voice_service.core.vocabulary import Scope, Service
from voice_service.tenancy.open_sessions import open_session
from voice_service.tenancy.principal import Principal
from voice_service.web.context import AppContext
from voice_service.web.deps import authenticate_secret, check_scope
from voice_service.web.key_watch import CutOff, key_watched
from voice_service.web.ledgers import attach_ledger

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


@dataclass(slots=True)
class Activity:
    """When the client last sent what the session took (audio, text): other messages, bad
    or not, do not keep a session from going idle."""

    at: float = field(default_factory=time.monotonic)

    def touch(self) -> None:
        self.at = time.monotonic()


@dataclass(frozen=True, slots=True)
class Session:
    context: AppContext
    ledger: Ledger
    principal: Principal
    channel: Channel
    cut_off: CutOff
    activity: Activity = field(default_factory=Activity)


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
    client = websocket.client.host if websocket.client else None
    ledger = Ledger(context.books, "GET", websocket.url.path, client=client)
    attach_ledger(websocket.scope, ledger)
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
            async with key_watched(context, principal.key_id, scope, service) as cut_off:
                await run(Session(context, ledger, principal, channel, cut_off), prepared)
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


@dataclass(frozen=True, slots=True)
class Ending:
    """Why the node ends a session: the error event's code and message, and the close code."""

    code: str
    message: str
    close_code: int = 1000

    @staticmethod
    def cut_off(session: Session) -> Ending:
        """The key may no longer use the session: 1008, the policy's violation."""
        error = session.cut_off.error
        assert error is not None
        return Ending(error.code.lower(), error.message, 1008)


# Why a session ends before the client's next message.
Ends = Literal["expired", "idle", "stopping", "cut_off"]


@overload
async def next_message(
    session: Session, ends_at: float, idle: float, busy: Callable[[], bool]
) -> Message | Ends: ...


@overload
async def next_message(
    session: Session,
    ends_at: float,
    idle: float,
    busy: Callable[[], bool],
    failed: asyncio.Event,
) -> Message | Ends | Literal["failed"]: ...


async def next_message(
    session: Session,
    ends_at: float,
    idle: float,
    busy: Callable[[], bool],
    failed: asyncio.Event | None = None,
) -> Message | Ends | Literal["failed"]:
    """The client's next message; or why the session ends first: its key may no longer use
    it (`cut_off`), the node is `stopping`, the session's own work `failed`, its time
    (`ends_at`, on `time.monotonic()`) is up, or the client sent nothing the session took
    (`Session.activity`) for `idle` seconds while the session was not `busy` (waiting on the
    node is not idleness)."""
    stopping, cut_off = session.context.stopping, session.cut_off.event
    failed = failed or asyncio.Event()
    while True:
        if cut_off.is_set():
            return "cut_off"
        if stopping.is_set():
            return "stopping"
        if failed.is_set():
            return "failed"
        quiet_until = session.activity.at + idle
        receiving = asyncio.ensure_future(session.channel.websocket.receive())
        ending = [asyncio.ensure_future(e.wait()) for e in (stopping, cut_off, failed)]
        try:
            done, _ = await asyncio.wait(
                {receiving, *ending},
                timeout=max(0.0, min(quiet_until, ends_at) - time.monotonic()),
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            for waiting in ending:
                waiting.cancel()
            receiving.cancel()  # a message not yet taken stays in the connection's queue
        if receiving in done and not cut_off.is_set():
            return receiving.result()
        if cut_off.is_set() or stopping.is_set() or failed.is_set():
            continue  # said at the top of the loop
        now = time.monotonic()
        if now >= ends_at:
            return "expired"
        if now >= quiet_until:
            if not busy():
                return "idle"
            session.activity.touch()  # the node is working for it: idleness starts after


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
