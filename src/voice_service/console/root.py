"""GET /: a browser is sent to the console; an API client gets the JSON 404 it always got."""

from __future__ import annotations

from fastapi import Request, Response

from voice_service.console.pages import CONSOLE_PREFIX, redirect
from voice_service.core.errors import NotFound

# One URL, two answers chosen by Accept: caches must keep them apart.
_VARY = {"Vary": "Accept"}


async def root(request: Request) -> Response:
    if not accepts_html(request.headers.get("accept", "")):
        raise NotFound(f"No route {request.method} {request.url.path}.", headers=_VARY)
    response = redirect(f"{CONSOLE_PREFIX}/")
    response.headers.update(_VARY)
    return response


def accepts_html(accept: str) -> bool:
    """Whether the Accept header names text/html with a non-zero quality (as every browser's
    navigation does). `*/*` alone is curl or a library, not a browser."""
    for media_range in accept.split(","):
        media_type, *params = (part.strip() for part in media_range.split(";"))
        if media_type.lower() != "text/html":
            continue
        quality = next((p.split("=", 1)[1] for p in params if p.lower().startswith("q=")), "1")
        try:
            return float(quality) > 0
        except ValueError:
            return False
    return False
