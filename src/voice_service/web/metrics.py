"""GET /metrics: Prometheus' text format, outside the versioned API, without an API key;
behind a bearer token of its own when `metrics_token` is set."""

from __future__ import annotations

import asyncio
import hmac
from typing import Annotated

from fastapi import APIRouter, Header
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from voice_service.core.errors import InvalidApiKey
from voice_service.web.deps import Context

router = APIRouter(include_in_schema=False)


@router.get("/metrics")
async def metrics(
    context: Context, authorization: Annotated[str | None, Header()] = None
) -> Response:
    token = context.settings.metrics_token
    if token is not None and not _bears(authorization, token):
        raise InvalidApiKey(
            "Missing or wrong metrics token.", headers={"WWW-Authenticate": "Bearer"}
        )
    # Off the event loop: with several workers it reads every worker's files.
    body = await asyncio.to_thread(context.metrics.exposition)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


def _bears(authorization: str | None, token: str) -> bool:
    scheme, _, credentials = (authorization or "").partition(" ")
    # Compared in constant time, so the answer's timing does not tell the token apart.
    return scheme.lower() == "bearer" and hmac.compare_digest(
        credentials.strip().encode(), token.encode()
    )
