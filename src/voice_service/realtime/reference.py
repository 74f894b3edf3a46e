"""/api/v1/docs/websockets: the reference page of the WebSocket protocols (which OpenAPI
cannot describe), in the API reference's frame, with this node's limits filled in."""

from __future__ import annotations

from pathlib import Path
from string import Template
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from voice_service.audio.vad import RATE
from voice_service.realtime.transcription import (
    MAX_BUFFER,
    MAX_TURN,
    MAX_WAITING_TURNS,
    MIN_COMMIT,
)
from voice_service.settings import Settings
from voice_service.speech.clauses import LONGEST_RUN
from voice_service.web.deps import Context
from voice_service.web.docs import PAGE_HEADERS, docs_bar, page_head

_PAGE = Template((Path(__file__).parent / "websockets.html").read_text(encoding="utf-8"))


def reference_router(prefix: str) -> APIRouter:
    router = APIRouter(include_in_schema=False)
    docs = f"{prefix}/docs"
    assets = f"{docs}/assets"

    @router.get(f"{docs}/websockets")
    async def websockets_page(context: Context) -> HTMLResponse:
        text = _PAGE.substitute(
            head=f'{page_head(assets)}\n<link rel="stylesheet" href="{assets}/docs.css">',
            bar=docs_bar(docs, websockets=True),
            **_limits(context.settings),
        )
        return HTMLResponse(text, headers=PAGE_HEADERS)

    return router


def _limits(settings: Settings) -> dict[str, Any]:
    """The figures the page gives: this node's settings and the protocols' own."""
    return {
        "idle_seconds": f"{settings.realtime_idle_seconds:g}",
        "max_seconds": f"{settings.max_realtime_seconds:g}",
        "sessions_per_key": settings.max_realtime_sessions_per_key,
        "longest_run": LONGEST_RUN,
        "max_turn_seconds": MAX_TURN // RATE,
        "max_buffer_seconds": MAX_BUFFER // RATE,
        "min_commit_ms": MIN_COMMIT * 1000 // RATE,
        "waiting_turns": MAX_WAITING_TURNS,
    }
