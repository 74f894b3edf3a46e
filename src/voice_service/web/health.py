"""Liveness and readiness, outside the versioned API and without auth."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from voice_service.kit.ratelimit import DEGRADED_WARNING
from voice_service.kit.waiting import wait_at_most
from voice_service.web.context import AppContext
from voice_service.web.deps import Context

router = APIRouter(include_in_schema=False)
T = TypeVar("T")

# Load balancers give up on a probe after a few seconds: each check gets less than that,
# and they run side by side.
CHECK_SECONDS = 2.5


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(context: Context) -> JSONResponse:
    """Ready when the engines are loaded, the database answers, and each capability the
    node offers has something to serve it: a local engine, or a provider with a replica
    that is not left out. A Redis outage leaves the node ready (rate limits fall back to
    per-process windows) with a warning. The inference queues (waiting and running, per
    capability) and the providers' replicas inform."""
    database, _ = await asyncio.gather(
        _within(CHECK_SECONDS, context.database_answers()),
        _within(CHECK_SECONDS, context.limiter.check()),  # notices a Redis outage
    )
    checks = {"engines": context.engines is not None, "database": database is True}
    if context.providers.all:
        checks["providers"] = _inference_served(context)
    warnings = [DEGRADED_WARNING] if context.limiter.degraded else []
    if context.request_log.spooling:
        warnings.append("Request-log rows are spooled on this node until the database returns.")
    ready = all(checks.values())
    return JSONResponse(
        {
            "status": "ready" if ready else "not ready",
            "checks": checks,
            "warnings": warnings,
            "queues": context.pool.queues(),
            "providers": context.providers.readiness(),
        },
        status_code=200 if ready else 503,
    )


def _inference_served(context: AppContext) -> bool:
    """Whether speech and transcription, where the node offers them, can each be served
    by a local engine or a provider that is not left out."""
    engines = context.engines
    providers = context.providers.all
    local_speech = engines is not None and bool(engines.speakers)
    local_transcription = engines is not None and engines.transcribers is not None
    for local, offered_there in (
        (local_speech, [p for p in providers if p.config.speech is not None]),
        (local_transcription, [p for p in providers if p.config.transcription is not None]),
    ):
        if offered_there and not local and not any(p.replicas.can_serve for p in offered_there):
            return False
    return True


async def _within(seconds: float, check: Coroutine[Any, Any, T]) -> T | None:
    """The check's result, or None if it failed or is still running after `seconds`."""
    try:
        return await wait_at_most(seconds, check)
    except Exception:
        return None
