"""Liveness and readiness, outside the versioned API and without auth."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from voice_service.deps import Context

router = APIRouter(include_in_schema=False)


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(context: Context) -> JSONResponse:
    checks = {"engines": context.engines is not None}
    try:
        async with context.db.connect() as connection:
            await connection.execute(text("SELECT 1"))
        checks["database"] = True
    except Exception:
        checks["database"] = False
    try:
        checks["rate_limits"] = await context.limiter.ping()
    except Exception:
        checks["rate_limits"] = False
    ready = all(checks.values())
    return JSONResponse(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status_code=200 if ready else 503,
    )
