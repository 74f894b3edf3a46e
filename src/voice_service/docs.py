"""/api/v1/docs: Swagger UI 5 served by the app itself (the dist files that the
fastapi-offline package ships), so the API reference renders our OpenAPI 3.1 document
offline, under a CSP without inline script."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse, Response

from voice_service.errors import NotFound

_SWAGGER_UI = Path(str(files("fastapi_offline") / "static"))
_HERE = Path(__file__).parent
# A fixed list: no path from the URL reaches the disk.
_ASSETS = {
    "swagger-ui-bundle.js": (_SWAGGER_UI / "swagger-ui-bundle.js", "text/javascript"),
    "swagger-ui.css": (_SWAGGER_UI / "swagger-ui.css", "text/css"),
    "docs-init.js": (_HERE / "docs_init.js", "text/javascript"),
    "favicon.svg": (_HERE / "console" / "static" / "logo.svg", "image/svg+xml"),
}
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
_PAGE_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def docs_router(prefix: str) -> APIRouter:
    router = APIRouter(prefix=f"{prefix}/docs", include_in_schema=False)
    assets = f"{prefix}/docs/assets"
    page = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8"><title>Voice Service API reference</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="{assets}/swagger-ui.css">
<link rel="icon" href="{assets}/favicon.svg" type="image/svg+xml">
</head>
<body>
<div id="swagger-ui" data-openapi-url="{prefix}/openapi.json"></div>
<script src="{assets}/swagger-ui-bundle.js"></script>
<script src="{assets}/docs-init.js"></script>
</body>
</html>"""

    @router.get("")
    async def docs_page() -> HTMLResponse:
        return HTMLResponse(page, headers=_PAGE_HEADERS)

    @router.get("/assets/{name}")
    async def docs_asset(name: str) -> Response:
        if name not in _ASSETS:
            raise NotFound(f"No asset {name!r}.")
        path, media_type = _ASSETS[name]
        headers = {"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"}
        return FileResponse(path, media_type=media_type, headers=headers)

    return router
