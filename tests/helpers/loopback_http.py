"""A plain HTTP server on 127.0.0.1 in a thread: the peer a test needs where the service
reaches out (a webhook receiver, a file server)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# (method, path, lower-cased headers, body) -> (status, headers, body)
Handle = Callable[[str, str, dict[str, str], bytes], tuple[int, dict[str, str], bytes]]


@contextmanager
def http_server(handle: Handle) -> Iterator[int]:
    """Answer every request with `handle`; yields the port."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, extra, content = handle(self.command, self.path, headers, body)
            self.send_response(status)
            for name, value in {**extra, "Content-Length": str(len(content))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = _answer

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
