"""An upstream that misbehaves on cue, for the faults real servers only show now and then: a
5xx, JSON that does not parse, the wrong content type, an answer that stalls, trickles, or
stops mid-way. A Starlette app served by uvicorn on a loopback port in a daemon thread.

The test queues how the next requests are answered (`will`) and reads what each request got
(`requests`). An answer can hold at a given chunk until `release()`: with a FaultProxy in
front, the test then resets the connection at a known point of the body, with no timing.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.helpers.ports import free_port

# Bytes that start like an MP3 frame: the upstream's "audio" is passed through, not decoded.
AUDIO = b"\xff\xf3\x44\xc4" + bytes(412)
# A hold that nobody releases ends by itself, so a failing test cannot hang the server.
HOLD_LIMIT_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class Answer:
    """How one request is answered: `status`, then the body in `chunks`, `gap` seconds
    apart. With `hold_after` the answer waits for `release()` once that many chunks are out
    (0: before the status line, a stalled upstream)."""

    status: int = 200
    content_type: str = "audio/mpeg"
    chunks: tuple[bytes, ...] = (AUDIO,)
    gap: float = 0.0
    hold_after: int | None = None
    endless: bool = False  # the chunks again and again, until the client stops reading
    # The body made of the request's headers instead of `chunks` (an upstream that quotes
    # what it was sent).
    quoting: Callable[[dict[str, str]], bytes] | None = None


@dataclass(slots=True)
class Received:
    """A request the upstream got, and how far its answer went."""

    method: str
    path: str
    headers: dict[str, str]
    answer: Answer
    arrived: float = field(default_factory=time.monotonic)
    chunks_sent: int = 0
    bytes_sent: int = 0
    finished: float | None = None  # when the last chunk went out

    @property
    def seconds(self) -> float | None:
        """How long the upstream took to send the whole answer."""
        return None if self.finished is None else self.finished - self.arrived


# What a request gets when the test queued nothing: a failure it will notice.
UNSET = Answer(500, "text/plain", (b"the test set no answer for this request",))


class FaultyUpstream:
    def __init__(self, root: str) -> None:
        self.root = root  # http://127.0.0.1:PORT
        self.requests: list[Received] = []
        self._answers: deque[Answer] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._released = asyncio.Event()
        self.app = Starlette(
            routes=[Route("/{path:path}", self._answer, methods=["GET", "POST", "PUT", "DELETE"])]
        )

    def will(self, *answers: Answer) -> None:
        """Answer the next requests so, in order."""
        self._answers.extend(answers)

    def release(self) -> None:
        """Let every held answer go on."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._release_held)

    def reset(self) -> None:
        """Forget the queued answers and the requests, and release what is held."""
        self._answers.clear()
        self.requests.clear()
        self.release()

    def _release_held(self) -> None:
        held, self._released = self._released, asyncio.Event()
        held.set()

    async def _answer(self, request: Request) -> Response:
        self._loop = asyncio.get_running_loop()
        await request.body()  # the whole request is in before any answer
        answer = self._answers.popleft() if self._answers else UNSET
        received = Received(request.method, request.url.path, dict(request.headers.items()), answer)
        self.requests.append(received)
        if answer.hold_after == 0:
            await self._hold()
        return StreamingResponse(
            self._body(answer, received, request), answer.status, media_type=answer.content_type
        )

    async def _body(
        self, answer: Answer, received: Received, request: Request
    ) -> AsyncIterator[bytes]:
        chunks: Iterable[bytes] = answer.chunks
        if answer.quoting is not None:
            chunks = (answer.quoting(received.headers),)
        elif answer.endless:
            chunks = itertools.cycle(answer.chunks)
        stop_at = time.monotonic() + HOLD_LIMIT_SECONDS
        for index, chunk in enumerate(chunks):
            if index and answer.gap:
                await asyncio.sleep(answer.gap)
            if index and index == answer.hold_after:
                await self._hold()
            # Sending to a client that hung up is no error here: ask.
            if answer.endless and await request.is_disconnected():
                break
            if time.monotonic() > stop_at:  # an endless answer nobody stopped reading
                break
            yield chunk
            received.chunks_sent += 1
            received.bytes_sent += len(chunk)
        received.finished = time.monotonic()

    async def _hold(self) -> None:
        with suppress(TimeoutError):
            await asyncio.wait_for(self._released.wait(), HOLD_LIMIT_SECONDS)


@contextmanager
def faulty_upstream() -> Iterator[FaultyUpstream]:
    """The upstream on 127.0.0.1 until the block ends."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", free_port()))
    listener.listen(128)  # listening before uvicorn starts: no early connect is refused
    host, port = listener.getsockname()
    upstream = FaultyUpstream(f"http://{host}:{port}")
    server = uvicorn.Server(
        uvicorn.Config(upstream.app, log_level="warning", timeout_graceful_shutdown=5)
    )
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [listener]}, name="faulty-upstream", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "it did not start"
            time.sleep(0.02)
        yield upstream
    finally:
        upstream.release()
        server.should_exit = True
        thread.join(30)
        listener.close()


@contextmanager
def refusing_port() -> Iterator[int]:
    """A loopback port held but not listening: every connection to it is refused."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", free_port()))
        yield int(held.getsockname()[1])
