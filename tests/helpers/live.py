"""A real HTTP server in this process (uvicorn with our protocol, on a free port) over the
suite's engines and database, for clients that speak HTTP themselves: OpenAI's SDK, and
streams read chunk by chunk. Being in-process, tests can read the server's own evidence:
its log records, in the order the server made them, and its inference pool."""

from __future__ import annotations

import asyncio
import io
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import av
import uvicorn
from fastapi import FastAPI
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tests.helpers.app import Tenant, Tenants
from tests.helpers.inference import slots_held
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually
from voice_service.app import create_app
from voice_service.core.models import RequestLogEntry, UsageRecord
from voice_service.inference.engines import Engines
from voice_service.settings import Settings
from voice_service.web.server import HttpProtocol

# The server's records that show what it did when (see `ServerLog`).
EVIDENCE_LOGGERS = ("voice_service.speech.service", "voice_service.web.streaming")


class ServerLog(logging.Handler):
    """The server's log records, in the order it emitted them."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def of(self, request_id: str) -> list[str]:
        return [message for message in list(self.messages) if message.startswith(request_id)]


@dataclass
class LiveServer:
    root: str
    app: FastAPI
    settings: Settings
    tenants: Tenants
    log: ServerLog

    def tenant(self, rate_limit: int | None = None) -> Tenant:
        return asyncio.run(self.tenants.create(rate_limit=rate_limit))

    def log_row(self, request_id: str, timeout: float = 30.0) -> RequestLogEntry:
        """The request's log row, once written (a stream writes it when it ends)."""
        row = eventually(
            lambda: self.query(select(RequestLogEntry).filter_by(request_id=request_id)),
            timeout,
        )
        assert row is not None, f"no log row for {request_id}"
        return row

    def usage_units(self, request_id: str) -> list[int]:
        async def work(session: AsyncSession) -> list[int]:
            rows = await session.scalars(select(UsageRecord).filter_by(request_id=request_id))
            return [row.units for row in rows]

        return asyncio.run(self.tenants.run(work))

    def query(self, statement: object) -> RequestLogEntry | None:
        async def work(session: AsyncSession) -> RequestLogEntry | None:
            return await session.scalar(statement)  # type: ignore[call-overload, no-any-return]

        return asyncio.run(self.tenants.run(work))

    def pool_in_use(self) -> int:
        return slots_held(self.app.state.context.pool)


@contextmanager
def serving(settings: Settings, engines: Engines) -> Iterator[LiveServer]:
    app = create_app(settings, engines)
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, http=HttpProtocol, lifespan="on", log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="live-server", daemon=True)
    log = ServerLog()
    loggers = [logging.getLogger(name) for name in EVIDENCE_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
        logger.addHandler(log)
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        yield LiveServer(f"http://127.0.0.1:{port}", app, settings, Tenants(settings), log)
    finally:
        server.should_exit = True
        thread.join(60)
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(log)
            logger.setLevel(level)


def audio_duration(data: bytes) -> tuple[str, int, float]:
    """Codec, sample rate and decoded duration of an audio file, by PyAV."""
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(stream))
        return stream.codec_context.name, stream.rate, samples / stream.rate
