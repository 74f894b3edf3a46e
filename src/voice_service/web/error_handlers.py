"""How the app answers errors: each in the shape of the API its path belongs to, with its
code noted in the request's ledger for the log row."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from voice_service.books.idempotency.keys import REPLAYED_HEADER, StoredAnswer
from voice_service.core.errors import (
    STATUS_ERRORS,
    ApiError,
    InvalidRequest,
    describe_errors,
    envelope_bytes,
    first_field,
)
from voice_service.web.ledgers import ledger_of
from voice_service.web.schemas import not_json_hint


def error_response(request: Request, error: ApiError) -> Response:
    ledger = ledger_of(request)
    ledger.failed(error.code)
    return Response(
        envelope_bytes(error, ledger.request_id, request.url.path),
        status_code=error.status,
        headers=error.headers,
        media_type="application/json",
    )


def _allowed_methods(request: Request) -> str:
    """Every method the OpenAPI document gives the request's path. Starlette's 405 names
    only the first route that matches the path, and one path may have several (GET and
    DELETE of /voices/{id} are declared by two routers); a literal path (/voices/clone) is
    its own, though a template (/voices/{id}) matches it too."""
    scope = {**request.scope, "method": ""}  # no method matches: every route of the path
    matching = [
        route
        for route in iter_route_contexts(request.app.routes)
        if route.methods and route.matches(scope)[0] is not Match.NONE
    ]
    literal = [route for route in matching if "{" not in (route.path or "")]
    methods = {method for route in literal or matching for method in route.methods or ()}
    return ", ".join(sorted(methods))


def install_error_handlers(app: FastAPI) -> None:
    async def on_api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return error_response(request, exc)

    async def on_validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        errors = exc.errors()
        message = describe_errors(errors)
        hint = not_json_hint(request)
        if hint is not None and any(error.get("loc", ())[:1] == ("body",) for error in errors):
            message = f"{message.rstrip('.')}. {hint}"
        return error_response(request, InvalidRequest(message, param=first_field(errors)))

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        error_class = STATUS_ERRORS.get(exc.status_code, InvalidRequest)
        if exc.status_code == 404:
            message = f"No route {request.method} {request.url.path}."
        elif exc.status_code == 400:  # Starlette's multipart parser says what was wrong
            message = str(exc.detail)
        else:
            message = error_class.default_message
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = _allowed_methods(request)
        return error_response(request, error_class(message, headers=headers))

    async def on_stored_answer(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StoredAnswer)
        ledger_of(request).replay(exc.error_code)
        return Response(
            exc.body,
            status_code=exc.status,
            media_type=exc.content_type,
            headers={REPLAYED_HEADER: "true"},
        )

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(StoredAnswer, on_stored_answer)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
