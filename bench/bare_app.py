"""The baseline for the gateway figure: a bare Starlette app that answers GET /api/v1/voices
with the very bytes the service returned (read from the file named by BENCH_BARE_BODY), so
the difference measured is the service's stack (auth, rate limit, request log, FastAPI),
not the payload. Run by uvicorn with the settings `voice-service serve` uses.
"""

from __future__ import annotations

import os
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

BODY = Path(os.environ.get("BENCH_BARE_BODY", "/dev/null")).read_bytes()


async def voices(_request: Request) -> Response:
    return Response(BODY, media_type="application/json")


async def healthz(_request: Request) -> Response:
    return Response(b'{"status":"ok"}', media_type="application/json")


app = Starlette(routes=[Route("/api/v1/voices", voices), Route("/readyz", healthz)])
