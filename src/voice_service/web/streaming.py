"""Responses whose body is made while it is sent, logged and billed when they end.

A stream's 200 goes out before its body exists, so its request-log row cannot be written
when the response starts (the middleware's rule): the stream tells its ledger how it ended
(`Ledger.stream_ended`): billed when its last byte reached the server; else logged with the
failure's status, its error code and the bytes sent, and billed nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from voice_service.books.ledger import Ledger
from voice_service.books.usage.charge import Charge
from voice_service.core.errors import ApiError, ClientClosedRequest, InternalError

logger = logging.getLogger(__name__)


class MeteredStream(Response):
    """A response that sends `body` as it is made (chunked transfer), stops making it when
    the client leaves, and tells the request's ledger how it ended: `charge` is billed if
    all of it went out."""

    def __init__(
        self,
        body: AsyncGenerator[bytes, None],
        *,
        media_type: str,
        ledger: Ledger,
        charge: Charge,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.chunks = body
        self.ledger = ledger
        self.charge = charge
        self.status_code = 200
        self.media_type = media_type
        self.background = None
        self.init_headers(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        ledger = self.ledger
        ledger.stream_starting()
        sent = _Counter()
        outcome: ApiError | None
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        except OSError:  # gone already: the body's worker is freed, the row still written
            await self.chunks.aclose()
            outcome = ClientClosedRequest()
        else:
            outcome = await self._send_body(send, sent)
        await ledger.stream_ended(self.charge, outcome, sent.bytes)
        # Returning without the final empty chunk makes the server close the connection, so
        # the client sees a cut-off body rather than a complete, shorter one.

    async def _send_body(self, send: Send, sent: _Counter) -> ApiError | None:
        """None when the whole body went out; else why it did not."""
        ledger = self.ledger
        sender = asyncio.ensure_future(self._send_chunks(send, sent, ledger.request_id))
        watcher = asyncio.ensure_future(ledger.client_gone.wait())
        try:
            done, _ = await asyncio.wait({sender, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
            sender.cancel()  # a no-op once it has finished; else the client left (or we stop)
        if sender in done:
            return sender.result()
        with contextlib.suppress(asyncio.CancelledError):
            await sender  # it closes the body, which frees its inference worker
        # The server reports a disconnect once the response is complete, too: that race
        # is not a client leaving early.
        return None if sent.complete else ClientClosedRequest()

    async def _send_chunks(self, send: Send, sent: _Counter, request_id: str) -> ApiError | None:
        try:
            async for chunk in self.chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                sent.bytes += len(chunk)
                logger.debug("%s handed %d bytes to the server", request_id, len(chunk))
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            sent.complete = True
        except ApiError as error:
            logger.warning("%s ended after %d bytes: %s", request_id, sent.bytes, error.message)
            return error
        except OSError:  # the server could not write to the client: it left
            return ClientClosedRequest()
        except Exception:
            logger.exception("%s failed after %d bytes", request_id, sent.bytes)
            return InternalError()
        finally:
            await self.chunks.aclose()
        return None


@dataclass(slots=True)
class _Counter:
    bytes: int = 0
    complete: bool = False  # the final chunk went to the server
