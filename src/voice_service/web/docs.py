"""/api/v1/docs: Swagger UI 5 served by the app itself (the dist files that the
fastapi-offline package ships), so the API reference renders our OpenAPI 3.1 documents
offline, under a CSP without inline script. The page for the WebSocket protocols, which
OpenAPI cannot describe, is realtime's own (`realtime.reference`), in the same frame."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response

from voice_service.core.errors import NotFound
from voice_service.web.openapi import NATIVE_DOCUMENT, OPENAI_DOCUMENT, openai_document

_SWAGGER_UI = Path(str(files("fastapi_offline") / "static"))
_HERE = Path(__file__).parent
# A fixed list: no path from the URL reaches the disk.
_ASSETS = {
    "swagger-ui-bundle.js": (_SWAGGER_UI / "swagger-ui-bundle.js", "text/javascript"),
    "swagger-ui.css": (_SWAGGER_UI / "swagger-ui.css", "text/css"),
    "docs-init.js": (_HERE / "docs_init.js", "text/javascript"),
    "docs.css": (_HERE / "docs.css", "text/css"),
    "favicon.svg": (_HERE.parent / "console" / "static" / "logo.svg", "image/svg+xml"),
}
_CONSOLE = "/console/"
# Script and styles only from files; "Try it out" calls this origin and may show what it
# answers (audio and images as blob: URLs, Swagger UI's icons as data: URLs).
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data: blob:",
        "media-src 'self' blob:",
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'none'",
    )
)
PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def docs_router(prefix: str) -> APIRouter:
    router = APIRouter(include_in_schema=False)
    docs = f"{prefix}/docs"
    assets = f"{docs}/assets"
    reference = _reference_page(docs, assets)

    @router.get(docs)
    async def docs_page() -> HTMLResponse:
        return HTMLResponse(reference, headers=PAGE_HEADERS)

    @router.get(f"{assets}/{{name}}")
    async def docs_asset(name: str) -> Response:
        if name not in _ASSETS:
            raise NotFound(f"No asset {name!r}.")
        path, media_type = _ASSETS[name]
        headers = {"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"}
        return FileResponse(path, media_type=media_type, headers=headers)

    @router.get(OPENAI_DOCUMENT)
    async def openai_openapi(request: Request) -> JSONResponse:
        return JSONResponse(openai_document(request.app))

    return router


def page_head(assets: str) -> str:
    return f"""<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="{assets}/favicon.svg" type="image/svg+xml">"""


def _reference_page(docs: str, assets: str) -> str:
    return f"""<!doctype html>
<html lang="en">
<head>
{page_head(assets)}
<title>Voice Service API reference</title>
<link rel="stylesheet" href="{assets}/swagger-ui.css">
<link rel="stylesheet" href="{assets}/docs.css">
</head>
<body>
{docs_bar(docs, websockets=False)}
<div id="swagger-ui"></div>
<script src="{assets}/swagger-ui-bundle.js"></script>
<script src="{assets}/docs-init.js"></script>
</body>
</html>"""


def docs_bar(docs: str, *, websockets: bool) -> str:
    """The reference's top bar: the way back to the console (which links here), the two
    documents (`docs_init.js` shows the one ?api= names) and the WebSocket page."""
    current = ' aria-current="page"' if websockets else ""
    return f"""<header class="docs-bar">
<a class="docs-console" href="{_CONSOLE}">Console</a>
<nav aria-label="API reference">
<a href="{docs}" data-api="native" data-openapi-url="{NATIVE_DOCUMENT}">Native API</a>
<a href="{docs}?api=openai" data-api="openai"
 data-openapi-url="{OPENAI_DOCUMENT}">OpenAI-compatible API</a>
<a href="{docs}/websockets"{current}>WebSocket protocols</a>
</nav>
</header>"""
