"""A TCP proxy the test steers, for fault injection between the nodes and PostgreSQL/Redis.

Modes, switched at any time from the test's (synchronous) code:

- `forward`: bytes flow both ways.
- `pause`: a black hole. Connections are accepted and kept, but no byte moves either way
  (nor an end of stream); on `forward` what was held flows on, as after a healed partition.
- `refuse`: open connections are cut and new ones are reset as soon as they arrive.
- `reset`: every open connection is reset (RST, via SO_LINGER 0); then the mode is `forward`.

The proxy runs on its own event loop in a daemon thread (`LoopThread`), so tests stay plain
sync functions.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

T = TypeVar("T")
Mode = Literal["forward", "pause", "refuse", "reset"]

_CHUNK = 64 * 1024


class LoopThread:
    """An asyncio loop in a daemon thread; `run` hands it a coroutine and waits."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = 60) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()


@dataclass(eq=False)
class _Connection:
    downstream: asyncio.StreamWriter  # the client's side (a node)
    task: asyncio.Task[None] | None
    upstream: asyncio.StreamWriter | None = None
    pumps: list[asyncio.Task[None]] = field(default_factory=list)

    def cut(self, *, reset: bool) -> None:
        for writer in (self.downstream, self.upstream):
            if writer is not None:
                _abort(writer, reset=reset)
        for pump in self.pumps:
            pump.cancel()
        if self.task is not None:
            self.task.cancel()


def _abort(writer: asyncio.StreamWriter, *, reset: bool) -> None:
    if reset:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultProxy:
    """Listens on 127.0.0.1:`port` (a free one) and forwards to `target`."""

    def __init__(self, target: tuple[str, int], name: str) -> None:
        self.target = target
        self.name = name
        self.mode: Mode = "forward"
        self._thread = LoopThread(f"faultproxy-{name}")
        self._connections: set[_Connection] = set()
        self._flowing = asyncio.Event()
        self._server: asyncio.Server | None = None
        self.port: int = self._thread.run(self._listen())

    async def _listen(self) -> int:
        self._flowing.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    def set_mode(self, mode: Mode) -> None:
        self._thread.run(self._switch(mode))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._thread.run(self._close(), timeout=10)
        self._thread.stop()

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    async def _switch(self, mode: Mode) -> None:
        if mode == "pause":
            self._flowing.clear()
        elif mode in ("refuse", "reset"):
            for connection in list(self._connections):
                connection.cut(reset=True)
            self._connections.clear()
        if mode in ("forward", "reset"):
            self._flowing.set()
        self.mode = "forward" if mode == "reset" else mode

    async def _close(self) -> None:
        await self._switch("refuse")
        if self._server is not None:
            self._server.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "refuse":
            _abort(writer, reset=True)
            return
        connection = _Connection(writer, asyncio.current_task())
        self._connections.add(connection)
        try:
            await self._flowing.wait()  # a paused proxy holds new connections too
            up_reader, up_writer = await asyncio.open_connection(*self.target)
            connection.upstream = up_writer
            connection.pumps = [
                asyncio.create_task(self._pump(reader, up_writer)),
                asyncio.create_task(self._pump(up_reader, writer)),
            ]
            # Either side's end (or failure) ends the connection: both protocols close fully.
            await asyncio.wait(connection.pumps, return_when=asyncio.FIRST_COMPLETED)
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            self._connections.discard(connection)
            for pump in connection.pumps:
                pump.cancel()
            for side in (writer, connection.upstream):
                if side is not None:
                    side.close()  # flushes what was written; a no-op after a cut

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while True:
                data = await reader.read(_CHUNK)
                await self._flowing.wait()  # paused: hold the bytes (or the end) here
                if not data:
                    return
                writer.write(data)
                await writer.drain()
