"""Liveness and readiness, outside the versioned API and without auth."""

from __future__ import annotations

import asyncio
import contextlib

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from voice_service.context import AppContext
from voice_service.deps import Context
from voice_service.ratelimit import DEGRADED_WARNING

router = APIRouter(include_in_schema=False)

# Load balancers give up on a probe after a few seconds: each check gets less than that,
# and they run side by side.
CHECK_SECONDS = 2.5


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(context: Context) -> JSONResponse:
    """Ready when the engines are loaded and the database answers. A Redis outage leaves
    the node ready (rate limits fall back to per-process windows) with a warning."""
    database, _ = await asyncio.gather(_database_answers(context), _check_limiter(context))
    checks = {"engines": context.engines is not None, "database": database}
    warnings = [DEGRADED_WARNING] if context.limiter.degraded else []
    if context.request_log.spooling:
        warnings.append("Request-log rows are spooled on this node until the database returns.")
    ready = all(checks.values())
    return JSONResponse(
        {"status": "ready" if ready else "not ready", "checks": checks, "warnings": warnings},
        status_code=200 if ready else 503,
    )


async def _database_answers(context: AppContext) -> bool:
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CHECK_SECONDS), context.db.connect() as connection:
            await connection.execute(text("SELECT 1"))
            return True
    return False


async def _check_limiter(context: AppContext) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(CHECK_SECONDS):
            await context.limiter.check()
