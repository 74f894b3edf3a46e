"""What the request log will say of one request, gathered while it is served."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from voice_service.auth.principal import Principal
from voice_service.requestlog.repository import LogEntry

MAX_LOGGED_PATH = 2048  # the column's width: a longer path must not cost the row


@dataclass(slots=True)
class RequestRecord:
    """Made by the middleware for every request. Its row is written exactly once: with a
    billed success's own transaction (`written` is then set); for a `streamed` response,
    by the response itself when the stream ends (`streaming.MeteredStream`); or else by the
    middleware when the response starts. `client_gone` is set once the client has hung up
    (known only after its request body has been read)."""

    request_id: str
    method: str
    path: str
    started: float = field(default_factory=time.perf_counter)
    written: bool = False
    streamed: bool = False
    client_gone: asyncio.Event = field(default_factory=asyncio.Event)

    def entry(
        self,
        status: int,
        principal: Principal | None,
        error_code: str | None,
        bytes_sent: int | None = None,
    ) -> LogEntry:
        return LogEntry(
            request_id=self.request_id,
            org_id=principal.org_id if principal else None,
            key_id=principal.key_id if principal else None,
            method=self.method,
            path=self.path[:MAX_LOGGED_PATH],
            status=status,
            error_code=error_code,
            duration_ms=round((time.perf_counter() - self.started) * 1000),
            bytes_sent=bytes_sent,
        )
