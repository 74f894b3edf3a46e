"""/api/v1/docs: Swagger UI served by the app itself (from the swagger-ui-bundle package),
so the API reference works offline and under a CSP without inline script."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse, Response
from swagger_ui_bundle import swagger_ui_path

from voice_service.errors import NotFound

_ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
}
_INIT = Path(__file__).parent / "docs_init.js"


def docs_router(prefix: str) -> APIRouter:
    router = APIRouter(prefix=f"{prefix}/docs", include_in_schema=False)
    assets = f"{prefix}/docs/assets"
    page = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8"><title>Voice Service API reference</title>
<link rel="stylesheet" href="{assets}/swagger-ui.css">
<link rel="icon" href="{assets}/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui" data-openapi-url="{prefix}/openapi.json"></div>
<script src="{assets}/swagger-ui-bundle.js"></script>
<script src="{assets}/docs-init.js"></script>
</body>
</html>"""

    @router.get("")
    async def docs_page() -> HTMLResponse:
        return HTMLResponse(page)

    @router.get("/assets/{name}")
    async def docs_asset(name: str) -> Response:
        headers = {"Cache-Control": "public, max-age=86400"}
        if name == "docs-init.js":
            return FileResponse(_INIT, media_type="text/javascript", headers=headers)
        if name not in _ASSETS:  # a fixed list: no path from the URL reaches the disk
            raise NotFound(f"No asset {name!r}.")
        return FileResponse(Path(swagger_ui_path) / name, media_type=_ASSETS[name], headers=headers)

    return router
