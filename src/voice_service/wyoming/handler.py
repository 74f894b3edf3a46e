"""One Wyoming connection: its events read (bounded: `reading`), each request served as the
listener's key's request, one at a time.

A request is a `describe`, a `synthesize`, a streamed synthesis (`synthesize-start` to
`synthesize-stop`) or a transcription (`transcribe`, or a bare `audio-start`, to
`audio-stop`). A request refused or failed is answered with Wyoming's `error` event (its
`code` the API's error code) and the connection reads on; what is not a Wyoming event is
answered the same way and the connection closed. Events of other domains (wake words,
intents) are dropped, as Wyoming servers do. Whatever ends the connection, a request under
way is logged as ended there, billed only the speech whose audio went out.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

from wyoming.event import Event
from wyoming.ping import Pong
from wyoming.server import AsyncEventHandler

from voice_service.books.ledger import Ledger, failure_answer
from voice_service.core.errors import (
    ApiError,
    ClientClosedRequest,
    InvalidRequest,
    ProviderError,
)
from voice_service.web.context import AppContext
from voice_service.wyoming.connection import Connection
from voice_service.wyoming.describe import service_info
from voice_service.wyoming.listening import Transcription
from voice_service.wyoming.reading import Left, Unreadable, read_event
from voice_service.wyoming.requests import WyomingPath, admitted, new_ledger
from voice_service.wyoming.speaking import StreamedSynthesis, parsed_text, synthesize

if TYPE_CHECKING:
    from asyncio import StreamReader, StreamWriter

# What keeps a connection open: an event of a request (a ping, or another domain's event,
# which is dropped, does not).
REQUESTS = frozenset(
    {
        "describe",
        "synthesize",
        "synthesize-start",
        "synthesize-chunk",
        "synthesize-stop",
        "transcribe",
        "audio-start",
        "audio-chunk",
        "audio-stop",
    }
)
STOPPING = "This node is stopping: connect again (to it once restarted, or to another node)."


class WyomingHandler(AsyncEventHandler):
    def __init__(
        self,
        reader: StreamReader,
        writer: StreamWriter,
        context: AppContext,
        key_id: str,
        stopping: asyncio.Event,
    ) -> None:
        super().__init__(reader, writer)
        self._context = context
        self._key_id = key_id
        self._stopping = stopping
        self._connection = Connection(writer)
        self._synthesis: StreamedSynthesis | None = None
        self._transcription: Transcription | None = None

    @property
    def busy(self) -> bool:
        """A streamed request is under way (between its events)."""
        return self._synthesis is not None or self._transcription is not None

    async def run(self) -> None:
        """Events until the client leaves, sends what is not an event, makes no request
        for the idle timeout (pings and other domains' events do not count), or the node
        stops while no request is under way."""
        idle = self._context.settings.realtime_idle_seconds
        idle_until = time.monotonic() + idle
        try:
            while True:
                quiet = idle_until - time.monotonic()
                first = idle if self.busy else max(0.0, min(idle, quiet))
                event = await self._next_event(idle, first)
                if event is None or isinstance(event, Left):
                    break
                if isinstance(event, Unreadable):
                    error = InvalidRequest(f"Not a Wyoming event: {event.reason}.")
                    if event.silent and not self.busy and time.monotonic() >= idle_until:
                        error = InvalidRequest(f"No request for {idle:g} s (pings do not count).")
                    if self.busy:  # the request under way ends with it
                        await self._abandon(error)
                    else:
                        await self._connection.refuse(error)
                    break
                await self.handle_event(event)
                if event.type in REQUESTS:  # idle from when the node last worked for it
                    idle_until = time.monotonic() + idle
        finally:
            await self._abandon(ClientClosedRequest())
            self.writer.close()

    async def _next_event(self, idle: float, first: float) -> Event | Unreadable | Left | None:
        """The next event (begun within `first` seconds, the rest within `idle`); None when
        the node stops while no request is under way."""
        reading = asyncio.ensure_future(read_event(self.reader, idle, first))
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            while True:
                waiting = {reading} if self.busy else {reading, stopping}
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if reading in done:
                    return reading.result()
                if not self.busy:
                    return None
        finally:
            for task in (reading, stopping):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def handle_event(self, event: Event) -> bool:
        with contextlib.suppress(ClientClosedRequest):
            await self._handle(event)
        return True

    async def _handle(self, event: Event) -> None:
        kind = event.type
        if kind == "ping":
            text = event.data.get("text")
            await self._connection.send(Pong(text=text if isinstance(text, str) else None))
        elif kind == "describe":
            await self._describe()
        elif kind == "synthesize":
            if self._synthesis is None:  # in a stream it repeats the text, for older servers
                await self._request(WyomingPath.SYNTHESIZE, event)
        elif kind == "synthesize-start":
            await self._request(WyomingPath.SYNTHESIZE_STREAM, event)
        elif kind in ("synthesize-chunk", "synthesize-stop"):
            await self._streamed_text(event)
        elif kind in ("transcribe", "audio-start", "audio-chunk", "audio-stop"):
            await self._audio(event)

    async def _describe(self) -> None:
        ledger = new_ledger(self._context, WyomingPath.DESCRIBE)
        try:
            principal = await admitted(self._context, ledger, self._key_id)
            info = await service_info(self._context, principal)
        except Exception as exc:
            await self._refused(ledger, exc)
            return
        try:
            await self._connection.send(info)
        except ClientClosedRequest as gone:
            await ledger.refused(gone)
            raise
        await ledger.answered(200)

    async def _request(self, path: WyomingPath, event: Event) -> None:
        """A new request: refused while another is under way or the node stops."""
        ledger = new_ledger(self._context, path)
        try:
            if self.busy:
                raise InvalidRequest("Another request is under way on this connection.")
            if self._stopping.is_set():
                raise ProviderError(STOPPING)
            self._connection.request_begins()
            if path is WyomingPath.SYNTHESIZE:
                await synthesize(self._context, self._connection, ledger, self._key_id, event)
            elif path is WyomingPath.SYNTHESIZE_STREAM:
                self._synthesis = await StreamedSynthesis.start(
                    self._context, self._connection, ledger, self._key_id, event
                )
            else:
                self._transcription = await Transcription.start(
                    self._context, self._connection, ledger, self._key_id, event
                )
        except Exception as exc:
            await self._refused(ledger, exc)

    async def _streamed_text(self, event: Event) -> None:
        synthesis = self._synthesis
        if synthesis is None:
            await self._connection.refuse(
                InvalidRequest(f"A {event.type} event outside synthesize-start.")
            )
            return
        try:
            if event.type == "synthesize-chunk":
                await synthesis.add(parsed_text(event))
                if synthesis.failure is None:
                    return
            else:
                await synthesis.stop()
        except Exception as exc:
            await self._failed(synthesis.ledger, exc)
        self._synthesis = None

    async def _audio(self, event: Event) -> None:
        if self._transcription is None:
            if event.type not in ("transcribe", "audio-start"):
                await self._connection.refuse(
                    InvalidRequest(f"An {event.type} event outside a transcription.")
                )
                return
            await self._request(WyomingPath.TRANSCRIBE, event)
            if event.type == "transcribe":
                return
        transcription = self._transcription
        if transcription is None:  # refused
            return
        try:
            if event.type == "transcribe":
                raise InvalidRequest("Another request is under way on this connection.")
            if event.type == "audio-start":
                transcription.begin_audio(event)
                return
            if event.type == "audio-chunk":
                await transcription.add(event)
                return
            await transcription.finish()
        except Exception as exc:
            await self._failed(transcription.ledger, exc)
        self._transcription = None

    async def _refused(self, ledger: Ledger, exc: Exception) -> None:
        """A request refused before it began: its error event and its row."""
        error = failure_answer(ledger.request_id, exc)
        await self._connection.refuse(error)
        await ledger.refused(error)

    async def _failed(self, ledger: Ledger, exc: Exception) -> None:
        """A streamed request failed part-way: its error event, its row (billed only the
        speech whose audio went out)."""
        await self._abandon(failure_answer(ledger.request_id, exc))

    async def _abandon(self, error: ApiError) -> None:
        """End the request under way, unfinished, with `error` (its event sent, unless the
        client is gone)."""
        synthesis, self._synthesis = self._synthesis, None
        transcription, self._transcription = self._transcription, None
        if synthesis is not None:
            await synthesis.abandon(error)
        if transcription is not None and not transcription.ledger.settled:
            await transcription.ledger.stream_ended(
                transcription.charge, error, self._connection.bytes_sent
            )
        if (synthesis or transcription) is not None and not isinstance(error, ClientClosedRequest):
            await self._connection.refuse(error)
