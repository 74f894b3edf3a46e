"""Pure-ASGI middleware: request id and request log around everything, HEAD served as GET,
then the guard on request bodies (size cap, idle timeout, malformed framing)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from urllib.parse import parse_qsl

from starlette.datastructures import MutableHeaders
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from voice_service.books.idempotency.answers import SentAnswer
from voice_service.books.idempotency.keys import RELEASED_HEADER
from voice_service.books.ledger import Books, Ledger, log_failure
from voice_service.books.usage.caps import UNITS_REMAINING
from voice_service.core.errors import (
    ApiError,
    ClientClosedRequest,
    InternalError,
    InvalidRequest,
    PayloadTooLarge,
    RequestTimeout,
    envelope_bytes,
)
from voice_service.core.vocabulary import megabytes
from voice_service.web.ledgers import attach_ledger, ledger_of

logger = logging.getLogger(__name__)

# Set in a request's scope state by the server protocol (voice_service.web.server) when the
# bytes after the headers are not valid HTTP framing (a bad chunk size): the request is
# the app's, so the app answers it, with its own id and log row.
MALFORMED_BODY = "malformed_body"


class RequestContextMiddleware:
    """Opens every request's ledger (its server-made id and its one log row), answers
    unhandled failures with the 500 envelope, and has the row written before the response
    starts, so a client that has its answer can already find it."""

    def __init__(self, app: ASGIApp, books: Books) -> None:
        self.app = app
        self.books = books

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        ledger = Ledger(
            self.books, scope["method"], scope["path"], client=client[0] if client else None
        )
        attach_ledger(scope, ledger)
        response_started = False
        presence = ClientPresence(receive, ledger.client_gone)
        sent: SentAnswer | None = None  # kept for the request's Idempotency-Key

        async def send_with_context(message: Message) -> None:
            nonlocal response_started, sent
            if message["type"] == "http.response.body" and sent is not None:
                sent.add(message.get("body", b""), more=message.get("more_body", False))
            elif message["type"] == "http.response.start":
                response_started = True
                headers = MutableHeaders(scope=message)
                sent = ledger.answer_to_keep(message["status"], headers.get("content-type"))
                if sent is not None and sent.will_not_fit(headers.get("content-length")):
                    headers[RELEASED_HEADER] = f"answer over {sent.max_bytes} bytes"
                    sent.too_large = True  # not collected at all
                headers["X-Request-ID"] = ledger.request_id
                if ledger.quota is not None:
                    for name, value in ledger.quota.headers().items():
                        headers.setdefault(name, value)
                # What a capped request leaves once billed; a failure is not billed (a 429
                # past a cap says what is left itself).
                if ledger.units_remaining is not None and message["status"] < 400:
                    headers.setdefault(UNITS_REMAINING, str(ledger.units_remaining))
                await ledger.answered(message["status"])
            await send(message)

        try:
            await self.app(scope, presence.receive, send_with_context)
        except ClientDisconnect:
            # The client hung up while sending its body: its doing, not a failure here, so
            # no traceback; the row says so, and nothing was billed (no work was done).
            if not response_started:
                await ledger.refused(ClientClosedRequest())
        except Exception as exc:
            log_failure(ledger.request_id, exc)
            if response_started:
                raise
            if ledger.settled:
                logger.error("request %s failed after its success was committed", ledger.request_id)
            error = InternalError()
            ledger.failed(error.code)
            await send_json_error(send_with_context, error, ledger.request_id, scope["path"])
        finally:
            presence.stop()
            if ledger.holds_key:
                await ledger.finish_key(sent)


class ClientPresence:
    """Tells a request's handlers when its client hangs up.

    ASGI reports a hang-up only to a `receive()` made after the request body has been read,
    and nothing makes one while a handler waits for a worker or runs: once the body is in,
    one task here waits on it for the whole request and sets `gone`. Later `receive()` calls
    (a stream watching for the client) wait for that same event."""

    def __init__(self, receive: Receive, gone: asyncio.Event) -> None:
        self._receive = receive
        self._gone = gone
        self._watcher: asyncio.Task[None] | None = None

    async def receive(self) -> Message:
        if self._watcher is not None:
            await self._gone.wait()
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] == "http.disconnect":
            self._gone.set()
        elif not message.get("more_body", False):
            self._watcher = asyncio.create_task(self._watch(), name="client-presence")
        return message

    async def _watch(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass  # nothing more is read from a request whose body is complete
        self._gone.set()

    def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()


class HeadAsGetMiddleware:
    """Answers HEAD wherever GET is answered, with GET's status and headers and no body
    (RFC 9110 9.3.2), without adding HEAD operations to the OpenAPI document."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        # A copy: the server reads the method from its own scope to know not to send a
        # body, and the request log keeps the method the client used.
        await self.app({**scope, "method": "GET"}, receive, send_headers_only)


class RequestBodyMiddleware:
    """Guards the request body as it streams in, before anything buffers it: refuses it
    over the cap, gives up on it when the client stops sending (which also frees the
    parser's temporary files), and refuses framing the server found malformed."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        advertised_bytes: int,
        idle_timeout: float,
        larger: Mapping[str, tuple[int, int]] | None = None,
    ) -> None:
        """`larger`: paths whose bodies may be bigger, each with its (max_bytes,
        advertised_bytes)."""
        self.app = app
        self.limit = (max_bytes, advertised_bytes)  # and the file limit users are told about
        self.larger = dict(larger or {})
        self.idle_timeout = idle_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes, advertised_bytes = self.larger.get(scope["path"], self.limit)
        declared = _content_length(scope)
        if declared is not None and declared > max_bytes:
            ledger = ledger_of(scope)
            ledger.failed(PayloadTooLarge.code)
            error = _too_large(advertised_bytes)
            await send_json_error(send, error, ledger.request_id, scope["path"])
            return
        received = 0
        body_done = False

        async def guarded_receive() -> Message:
            nonlocal received, body_done
            if body_done:  # later receives wait for a disconnect, which may take forever
                return await receive()
            try:
                async with asyncio.timeout(self.idle_timeout):
                    message = await receive()
            except TimeoutError:
                raise RequestTimeout(
                    f"No request body data arrived for {self.idle_timeout:g} s.",
                    headers={"Connection": "close"},  # the rest of the body is not awaited
                ) from None
            malformed = scope["state"].get(MALFORMED_BODY)
            if malformed is not None:
                raise InvalidRequest(malformed, headers={"Connection": "close"})
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > max_bytes:
                    raise _too_large(advertised_bytes)
                body_done = not message.get("more_body", False)
            return message

        await self.app(scope, guarded_receive, send)


class RepeatedQueryMiddleware:
    """Refuses a query that names a parameter twice: every parameter of the API takes one
    value, and a route reading only the last would let two different requests look alike
    (an Idempotency-Key's fingerprint sees both)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            repeated = _repeated_name(scope["query_string"].decode("latin-1"))
            if repeated is not None:
                ledger = ledger_of(scope)
                error = InvalidRequest(
                    f"The query names {repeated!r} more than once; give it one value.",
                    param=repeated,
                )
                ledger.failed(error.code)
                await send_json_error(send, error, ledger.request_id, scope["path"])
                return
        await self.app(scope, receive, send)


def _too_large(advertised_bytes: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"The request body exceeds the {megabytes(advertised_bytes)} limit.")


def _repeated_name(query: str) -> str | None:
    """The first parameter the query names twice, in one pass (a query may be long)."""
    seen: set[str] = set()
    for name, _ in parse_qsl(query, keep_blank_values=True):
        if name in seen:
            return name
        seen.add(name)
    return None


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def send_json_error(send: Send, error: ApiError, request_id: str, path: str) -> None:
    body = envelope_bytes(error, request_id, path)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *((k.lower().encode(), v.encode()) for k, v in error.headers.items()),
    ]
    if error.status == 413:
        headers.append((b"connection", b"close"))  # the unread rest of the body is dropped
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
