"""How `serve` runs uvicorn: on a socket it has bound and put to listen itself, first.

uvicorn binds only once the app's lifespan has run (migrations, then seconds of model
loading) when it runs one worker, so a busy port was reported late, after a banner saying
the service was up. `serve` binds before anything slow and before it prints a word: a busy
port fails at once, and from the banner on connections are accepted (they wait in the
listen backlog until the app is ready, instead of being refused).
"""

from __future__ import annotations

import contextlib
import errno
import socket

import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess


class CannotListen(Exception):
    """The address cannot be bound; the message says why and what to do."""


def listen(host: str, port: int, backlog: int) -> socket.socket:
    """A listening TCP socket on host:port, as uvicorn would bind it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family)
    try:
        # As uvicorn does: a restarted node takes its port back at once, past TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise CannotListen(_why(host, port, exc)) from None
    sock.set_inheritable(True)  # the worker processes uvicorn spawns serve on it
    return sock


def check_free(host: str, port: int, option: str) -> None:
    """Raise `CannotListen` unless host:port could be bound now (a listener the app binds
    later, in each worker process: a busy port is said before anything slow)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise CannotListen(_why(host, port, exc, option)) from None


def _why(host: str, port: int, exc: OSError, option: str = "--port") -> str:
    where = f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {port} is in use: cannot listen on {where} (another voice-service serve, "
            f"or another program, holds it). Stop it, or choose another port with {option}."
        )
    if exc.errno == errno.EACCES:
        return f"cannot listen on {where}: permission denied (ports below 1024 need root)."
    return f"cannot listen on {where}: {exc.strerror or exc}."


def run(config: uvicorn.Config, sock: socket.socket) -> int:
    """Serve on `sock` until stopped, as uvicorn.run would; the exit status."""
    if config.workers > 1:
        Multiprocess(config, sockets=[sock]).run()  # each spawned worker serves on `sock`
        return 0
    server = uvicorn.Server(config)
    with contextlib.suppress(KeyboardInterrupt):  # as uvicorn.run
        server.run(sockets=[sock])
    # A lifespan that failed exits on its own; this is a server stopped before it started.
    return 0 if server.started else STARTUP_FAILURE
