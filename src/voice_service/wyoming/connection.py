"""The client's side of one Wyoming connection, for sending: events one at a time (a
streamed synthesis sends audio while the connection reads text), the bytes of each
request's events counted as they go on the wire (its log row's `bytes_sent`); a client gone
makes every later send raise `ClientClosedRequest`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

from wyoming.error import Error
from wyoming.event import Eventable, async_write_event

from voice_service.core.errors import ApiError, ClientClosedRequest, session_message


class _Counted:
    """What `async_write_event` calls of a stream writer, counting what it writes."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self.written = 0

    def writelines(self, data: Iterable[bytes]) -> None:
        pieces = list(data)
        self.written += sum(len(piece) for piece in pieces)
        self._writer.writelines(pieces)

    def write(self, data: bytes) -> None:
        self.written += len(data)
        self._writer.write(data)

    async def drain(self) -> None:
        await self._writer.drain()


class Connection:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = _Counted(writer)
        self._lock = asyncio.Lock()
        self._request_began = 0
        self.gone = False

    def request_begins(self) -> None:
        """What is sent from here on is the new request's."""
        self._request_began = self._writer.written

    @property
    def bytes_sent(self) -> int:
        """Bytes of the request's events sent so far: their lines, data and payloads."""
        return self._writer.written - self._request_began

    async def send(self, message: Eventable) -> None:
        event = message.event()
        async with self._lock:
            if self.gone:
                raise ClientClosedRequest()
            try:
                await async_write_event(event, self._writer)  # type: ignore[arg-type]
            except (ConnectionError, OSError, RuntimeError):
                self.gone = True
                raise ClientClosedRequest() from None

    async def refuse(self, error: ApiError) -> None:
        """Wyoming's `error` event for `error` (its code as the API's envelope has it),
        unless the client is gone."""
        if not self.gone:
            with contextlib.suppress(ClientClosedRequest):
                await self.send(Error(text=session_message(error), code=error.code))
