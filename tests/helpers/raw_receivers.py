"""Webhook receivers that misbehave at the socket: each connection is handed to a function
of the test's, on 127.0.0.1, in a thread of its own. They keep what they did (connections
taken, bytes sent) as the server-side evidence of what the service did to them."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

MAX_SENT = 2 * 1024**3  # an endless answer stops here should nothing ever close it


@dataclass
class Misbehaviour:
    """What a receiver did: the connections it took and the bytes it managed to send."""

    connections: int = 0
    sent: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def took(self) -> None:
        with self.lock:
            self.connections += 1

    def wrote(self, count: int) -> None:
        with self.lock:
            self.sent += count


def read_request(connection: socket.socket) -> bytes:
    """The request's head and body (by its Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = connection.recv(65536)
        if not piece:
            return data
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        piece = connection.recv(65536)
        if not piece:
            break
        body += piece
    return head + b"\r\n\r\n" + body


def endless_answer(seen: Misbehaviour) -> Callable[[socket.socket], None]:
    """`200`, then a chunked body that never ends (until the service closes)."""
    chunk = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"

    def serve(connection: socket.socket) -> None:
        read_request(connection)
        connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        while seen.sent < MAX_SENT:
            connection.sendall(chunk)
            seen.wrote(len(chunk))

    return serve


def dripping_answer(seen: Misbehaviour, interval: float) -> Callable[[socket.socket], None]:
    """A whole `200` answer, one byte every `interval` seconds: each read comes well
    within any per-read timeout."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"

    def serve(connection: socket.socket) -> None:
        read_request(connection)
        for byte in answer:
            connection.sendall(bytes([byte]))
            seen.wrote(1)
            time.sleep(interval)

    return serve


@contextmanager
def raw_receiver(serve: Callable[[socket.socket], None], seen: Misbehaviour) -> Iterator[int]:
    """Serve each connection with `serve`; yields the port."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            seen.took()
            with contextlib.suppress(OSError):  # the service hung up: what is tested
                serve(self.request)

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    with Server(("127.0.0.1", 0), Handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server.server_address[1]
        finally:
            server.shutdown()
