"""The HTTP/1.1 protocol `serve` runs: uvicorn's httptools protocol, held to the service's
contract where uvicorn answers on its own.

uvicorn answers malformed HTTP with a plain-text 400 that bypasses the app, never times
out a connection that is slow to send its headers or to read its answer, and refuses
excess connections only with a plain-text 503 (when asked to). Here a malformed request
gets the error envelope, a request id and a request-log row (committed before the answer,
as for any response), headers must arrive within a deadline, a client that takes none of
its answer for the send timeout is cut off, and connections over the cap are closed at
once.

The WebSocket protocol `serve` runs is uvicorn's, but for its shutdown: a stopping node lets
an open session finish what it took before the session closes itself (`WebSocketProtocol`).

The app hands its settings and log writer over in the lifespan state, which uvicorn gives
every protocol instance (`app_state`): no globals, and each worker process has its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
from dataclasses import dataclass, field
from typing import Any

import httptools
from uvicorn._types import ASGISendEvent
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState

from voice_service.books.ledger import MAX_LOGGED_PATH, Books, Ledger
from voice_service.core.errors import (
    ApiError,
    InternalError,
    InvalidRequest,
    RequestTimeout,
    envelope_bytes,
)
from voice_service.web.middleware import MALFORMED_BODY

logger = logging.getLogger(__name__)

STATE_KEY = "connection_policy"  # the lifespan state entry this protocol reads
TLS_HANDSHAKE = 0x16  # the first byte of a TLS record carrying a ClientHello
REFUSAL_WARNING_SECONDS = 10.0  # a flood of refusals logs one line per interval, not each
SEND_BUFFER_BYTES = 128 * 1024  # per connection; Linux doubles it for its own bookkeeping


@dataclass(slots=True)
class ConnectionPolicy:
    """Per process: the limits from settings, the books requests go into, refusal counts."""

    header_timeout: float
    send_timeout: float  # a client taking no byte of its answer this long is cut off
    max_connections: int  # per node; shared evenly among the worker processes
    books: Books
    stopping: asyncio.Event  # the app's `AppContext.stopping`
    _refused: int = field(default=0, init=False)
    _last_warning: float = field(default=-math.inf, init=False)

    def note_refusal(self, now: float, capacity: int) -> None:
        self._refused += 1
        if now - self._last_warning >= REFUSAL_WARNING_SECONDS:
            logger.warning(
                "connection cap of %d reached in this process: refused %d connection(s)",
                capacity,
                self._refused,
            )
            self._refused, self._last_warning = 0, now


class HttpProtocol(HttpToolsProtocol):
    """One connection. uvicorn's parser and request cycle, with this module's answers
    where uvicorn would answer on its own, a header deadline and the connection cap."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        policy = app_state.get(STATE_KEY)
        if not isinstance(policy, ConnectionPolicy):
            raise RuntimeError(f"{__name__} needs the app's lifespan state ({STATE_KEY})")
        self._policy = policy
        self._capacity = max(1, policy.max_connections // max(1, config.workers))
        self.url = b""  # uvicorn sets it at the first request; an error may come earlier
        self._refused = False
        self._ignoring_input = False  # once answered on the protocol's own, nothing more is read
        self._head_pending = False  # a request has begun and its headers are not complete
        self._started_at = 0.0  # loop time the current request began, for its log row
        self._first_byte: int | None = None
        self._header_timer: asyncio.TimerHandle | None = None
        self._send_timer: asyncio.TimerHandle | None = None
        self._pending_answer: bytes | None = None

    # --- connection lifecycle -------------------------------------------------------------

    def connection_made(  # type: ignore[override]
        self, transport: asyncio.Transport
    ) -> None:
        if len(self.connections) >= self._capacity:
            # Before a byte is read or a task made: the cheapest refusal there is. There is
            # no request yet to answer, so no response and no log row; the client sees the
            # connection closed and may retry.
            self._refused = True
            transport.close()
            self._policy.note_refusal(self.loop.time(), self._capacity)
            return
        super().connection_made(transport)
        _bound_send_buffer(transport)
        self._started_at = self.loop.time()
        self._arm_header_timer()  # a fresh connection's headers are due from its opening

    def connection_lost(self, exc: Exception | None) -> None:
        if self._refused:
            return
        self._disarm_header_timer()
        self._disarm_send_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        # uvicorn's, but for what a parser error leads to (uvicorn: plain text, no log row).
        if self._ignoring_input:
            return
        if self._first_byte is None and data:
            self._first_byte = data[0]
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        except httptools.HttpParserError as exc:
            self._on_malformed(exc)

    def send_400_response(self, msg: str) -> None:
        # uvicorn's plain-text answer; data_received no longer calls it, but should a newer
        # uvicorn call it from elsewhere, the answer still keeps the contract.
        self._answer(InvalidRequest("Malformed HTTP request."))

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._ignoring_input:
            self._unset_keepalive_if_required()
            self._flush_answer()

    # --- parser callbacks -----------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_pending = True
        if self._header_timer is None:  # not a fresh connection: the clock starts now
            self._started_at = self.loop.time()
            self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self._disarm_header_timer()
        super().on_headers_complete()
        self._head_pending = False

    # --- header deadline ------------------------------------------------------------------

    def _arm_header_timer(self) -> None:
        self._header_timer = self.loop.call_later(
            self._policy.header_timeout, self._on_header_timeout
        )

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _on_header_timeout(self) -> None:
        self._header_timer = None
        if not self._head_pending:  # a connection opened and never used: nothing to answer
            self.transport.close()
            return
        seconds = self._policy.header_timeout
        self._answer(RequestTimeout(f"The request headers were not complete within {seconds:g} s."))

    # --- send deadline --------------------------------------------------------------------

    def pause_writing(self) -> None:
        # The transport's buffer is full: the app's next send waits until the client reads.
        super().pause_writing()
        self._arm_send_timer(self.transport.get_write_buffer_size())

    def resume_writing(self) -> None:
        super().resume_writing()
        self._disarm_send_timer()

    def _arm_send_timer(self, buffered: int) -> None:
        self._send_timer = self.loop.call_later(
            self._policy.send_timeout, self._on_send_timeout, buffered
        )

    def _disarm_send_timer(self) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def _on_send_timeout(self, buffered_then: int) -> None:
        self._send_timer = None
        buffered = self.transport.get_write_buffer_size()
        if buffered < buffered_then:  # it took something: another period to take more
            self._arm_send_timer(buffered)
            return
        host, port = self.client or ("-", 0)
        logger.warning(
            "client %s:%d took no byte of its answer for %g s: connection closed",
            host,
            port,
            self._policy.send_timeout,
        )
        # The app's pending send returns, and the request sees its client gone (a stream
        # is logged 499 with what it sent, and not billed).
        self.transport.abort()

    # --- malformed requests ---------------------------------------------------------------

    def _on_malformed(self, exc: httptools.HttpParserError) -> None:
        error = self._describe(exc)
        if self._head_pending or self.cycle is None:
            self._answer(error)
        else:
            self._refuse_body(error.message)

    def _describe(self, exc: httptools.HttpParserError) -> ApiError:
        if self._first_byte == TLS_HANDSHAKE and not self.url:
            return InvalidRequest("TLS is not served on this port: it speaks plain HTTP/1.1.")
        if self.url and self.parser.get_method() == b"PRI":
            return InvalidRequest("HTTP/2 is not served on this port: it speaks HTTP/1.1.")
        cause: BaseException = exc
        if isinstance(exc, httptools.HttpParserCallbackError):
            # A callback failed: uvicorn's URL parsing refusing the URL is the client's
            # error; anything else is a bug on this side, and the 500 must say so.
            cause = exc.__context__ or exc
            if not isinstance(cause, httptools.HttpParserError):
                logger.error("HTTP parser callback failed", exc_info=cause)
                return InternalError()
        return InvalidRequest(f"Malformed HTTP request: {str(cause).rstrip('.')}.")

    def _refuse_body(self, message: str) -> None:
        """The framing after a request's headers is broken: the request is already the
        app's, which answers it (see MALFORMED_BODY); this connection then closes."""
        self._ignoring_input = True
        cycle = self.cycle
        cycle.keep_alive = False
        if cycle.response_complete:
            self.transport.close()
        elif not cycle.response_started:
            cycle.scope["state"][MALFORMED_BODY] = message
            cycle.message_event.set()

    def _answer(self, error: ApiError) -> None:
        """Answer a request the app never saw, once its log row is committed, then close."""
        self._ignoring_input = True
        self._disarm_header_timer()
        method, path = self._request_line()
        # The loop's clock is time.monotonic, the ledger's.
        client = self.client[0] if self.client else None
        ledger = Ledger(self._policy.books, method, path, started=self._started_at, client=client)
        response = _raw_response(error, ledger.request_id, path, self.server_state.default_headers)
        task = self.loop.create_task(self._log_then_answer(ledger, error, response))
        self.tasks.add(task)  # so that a graceful shutdown waits for the row
        task.add_done_callback(self.tasks.discard)

    async def _log_then_answer(self, ledger: Ledger, error: ApiError, response: bytes) -> None:
        await ledger.refused(error)
        self._pending_answer = response
        self._flush_answer()

    def _flush_answer(self) -> None:
        # An earlier pipelined request still answering goes first; on_response_complete
        # calls back here when it is done.
        in_flight = self.cycle is not None and not self.cycle.response_complete
        if self._pending_answer is None or in_flight or self.transport.is_closing():
            return
        self.transport.write(self._pending_answer)
        self._pending_answer = None
        self.transport.close()

    def _request_line(self) -> tuple[str, str]:
        """The method and path as far as the parser got them; '-' for what it did not."""
        if not self.url:  # llhttp reads the method before the URL: no URL, no method yet
            return "-", "-"
        method = self.parser.get_method().decode("ascii", "replace")
        return method, _loggable(self.url.split(b"?", 1)[0])


def _bound_send_buffer(transport: asyncio.Transport) -> None:
    """Bound what the kernel holds for a client that does not read (Linux grows a socket's
    send buffer up to megabytes: a minute of PCM speech made for no one). Audio at any
    rate served still flows: the bound allows over a megabyte a second at 200 ms RTT."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)


def _loggable(raw: bytes) -> str:
    # Percent-encoded as in a URL: control bytes (NUL among them) must not reach the log
    # or the database, and the row should still show what was sent.
    text = "".join(chr(b) if 0x21 <= b <= 0x7E else f"%{b:02X}" for b in raw[:MAX_LOGGED_PATH])
    return text[:MAX_LOGGED_PATH]


def _raw_response(
    error: ApiError, request_id: str, path: str, defaults: list[tuple[bytes, bytes]]
) -> bytes:
    body = envelope_bytes(error, request_id, path)
    headers = [
        *defaults,  # Date and Server, as on every other response
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"x-request-id", request_id.encode()),
        (b"connection", b"close"),  # the parser cannot find where this request ends
    ]
    head = b"".join(name + b": " + value + b"\r\n" for name, value in headers)
    return STATUS_LINE[error.status] + head + b"\r\n" + body


class WebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket connection, but a node that stops tells the app instead of
    closing an open session with 1012 itself: the session finishes what it took (a live
    turn's transcript, received text's speech) and closes with 1012 on its own, within the
    drain timeout, after which uvicorn cancels it."""

    async def send(self, message: ASGISendEvent) -> None:
        await super().send(message)
        if message["type"] == "websocket.http.response.body" and not message.get("more_body"):
            # A refused upgrade (401, 429…) is a whole answer, not a handshake the app
            # failed to complete, which uvicorn would log as an error.
            self.handshake_complete = True

    def shutdown(self) -> None:
        policy = self.app_state.get(STATE_KEY)
        if self.handshake_complete and not self.close_sent and isinstance(policy, ConnectionPolicy):
            policy.stopping.set()
            return
        super().shutdown()
