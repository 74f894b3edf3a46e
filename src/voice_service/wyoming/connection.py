"""The client's side of one Wyoming connection, for sending: events one at a time (a
streamed synthesis sends audio while the connection reads text), the bytes counted; a
client gone makes every later send raise `ClientClosedRequest`."""

from __future__ import annotations

import asyncio
import contextlib

from wyoming.error import Error
from wyoming.event import Eventable, async_write_event

from voice_service.core.errors import ApiError, ClientClosedRequest, session_message


class Connection:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._lock = asyncio.Lock()
        self.bytes_sent = 0
        self.gone = False

    async def send(self, message: Eventable) -> None:
        event = message.event()
        async with self._lock:
            if self.gone:
                raise ClientClosedRequest()
            try:
                await async_write_event(event, self._writer)
            except (ConnectionError, OSError, RuntimeError):
                self.gone = True
                raise ClientClosedRequest() from None
            self.bytes_sent += len(event.payload or b"")

    async def refuse(self, error: ApiError) -> None:
        """Wyoming's `error` event for `error` (its code as the API's envelope has it),
        unless the client is gone."""
        if not self.gone:
            with contextlib.suppress(ClientClosedRequest):
                await self.send(Error(text=session_message(error), code=error.code))
