"""install_console(app): the customer console at /console/, outside the API."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.staticfiles import StaticFiles

from voice_service.console import (
    jobs,
    keys,
    pronunciation,
    request_log,
    root,
    sign_in,
    usage,
    voices,
    webhooks,
)
from voice_service.console.auth import PageNotFound, SignInRequired
from voice_service.console.pages import CONSOLE_PREFIX, redirect, render
from voice_service.console.previews import Previews
from voice_service.console.security import CsrfRefused
from voice_service.core.errors import ApiError
from voice_service.web.error_handlers import error_response
from voice_service.web.ledgers import ledger_of

STATIC_DIR = Path(__file__).parent / "static"


def install_console(app: FastAPI) -> None:
    console = APIRouter(prefix=CONSOLE_PREFIX, include_in_schema=False)
    console.add_api_route("", sign_in.home)  # /console as well as /console/
    for module in (sign_in, keys, usage, request_log, jobs, webhooks, voices, pronunciation):
        console.include_router(module.router)
    app.include_router(console)
    app.add_api_route("/", root.root, methods=["GET"], include_in_schema=False)
    app.mount(f"{CONSOLE_PREFIX}/static", StaticFiles(directory=STATIC_DIR), name="console-static")
    app.state.console_previews = Previews()

    async def on_sign_in_required(request: Request, _exc: Exception) -> Response:
        return redirect(f"{CONSOLE_PREFIX}/sign-in")

    async def on_not_found(request: Request, _exc: Exception) -> Response:
        return _error_page(request, 404, "Page not found", "There is nothing here.")

    async def on_csrf(request: Request, _exc: Exception) -> Response:
        ledger_of(request).failed("CSRF_REFUSED")
        return _error_page(
            request,
            403,
            "Form refused",
            "The form expired or came from another site. Go back, reload the page and try again.",
        )

    async def on_api_error(request: Request, exc: Exception) -> Response:
        """Console pages answer errors with a page; the API, and the console's own script
        (which asks for JSON), with the envelope."""
        assert isinstance(exc, ApiError)
        wants_json = "application/json" in request.headers.get("accept", "")
        if not request.url.path.startswith(f"{CONSOLE_PREFIX}/") or wants_json:
            return error_response(request, exc)
        ledger_of(request).failed(exc.code)  # for the request log
        page = _error_page(request, exc.status, "Something went wrong", exc.message)
        page.headers.update(exc.headers)  # Retry-After of a 429, among others
        return page

    app.add_exception_handler(SignInRequired, on_sign_in_required)
    app.add_exception_handler(PageNotFound, on_not_found)
    app.add_exception_handler(CsrfRefused, on_csrf)
    app.add_exception_handler(ApiError, on_api_error)


def _error_page(request: Request, status: int, title: str, message: str) -> Response:
    return render(request, "error.html", status=status, title=title, message=message)
