"""Ports for the servers the tests start."""

from __future__ import annotations

import socket
import threading

_handed_out: set[int] = set()
_lock = threading.Lock()


def free_port() -> int:
    """A port nothing listens on now that no earlier call in this process returned.

    Two probes in a row can get the same port from the kernel (CI saw two nodes of one
    cluster given one port, each then answering for the other), so the ports handed out are
    remembered and never given twice."""
    with _lock:
        while True:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = int(probe.getsockname()[1])
            if port not in _handed_out:
                _handed_out.add(port)
                return port
