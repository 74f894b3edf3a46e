"""The published interface descriptions, version 1.0.0, one per API: the native one (the
spec's /api/v1/openapi.json) and the OpenAI-compatible one under /v1 (/v1/openapi.json).
Each declares its own error shape on every error status, and the upload limit as this node
enforces it.

Two documents, not one: the spec binds the native document's paths to the server URL
/api/v1 and its errors to the spec's envelope; the /v1 operations have another base and
OpenAI's error shape. In one document they would need path-level servers, which code
generators and schemathesis ignore (they would call /api/v1/v1/...). The API reference
shows both (see `docs.py`)."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import iter_route_contexts

from voice_service.core.errors import OPENAI_PREFIX
from voice_service.core.vocabulary import megabytes
from voice_service.web.schemas import (
    COMPONENTS,
    IDEMPOTENCY_CONFLICT,
    error_responses,
    openai_error_responses,
)

NATIVE_PREFIX = "/api/v1"
NATIVE_DOCUMENT = f"{NATIVE_PREFIX}/openapi.json"
OPENAI_DOCUMENT = f"{OPENAI_PREFIX}/openapi.json"
DOCS_PAGE = f"{NATIVE_PREFIX}/docs"
WEBSOCKETS_PAGE = f"{DOCS_PAGE}/websockets"

_REQUEST_ID_HEADER = {
    "X-Request-ID": {
        "description": "Identifier of this request's log row (req_<token>).",
        "schema": {"type": "string", "pattern": "^req_[A-Za-z0-9]+$"},
    }
}
# OpenAPI describes no WebSocket: the reference's page for them is linked from both.
_WEBSOCKETS = (
    f"The WebSocket endpoints (text streamed in, live transcription) are described on "
    f"[WebSocket protocols]({WEBSOCKETS_PAGE})."
)
OPENAI_DESCRIPTION = f"""OpenAI's audio API: tools built for it (the `openai` SDKs, Open WebUI,
LiveKit and Pipecat plugins) work with the base URL `http://HOST:PORT/v1` and a Voice Service
key. The same keys, rate limits, request log and usage as the native API; errors in OpenAI's
shape, with the native API's statuses and lower-cased codes.

{_WEBSOCKETS}"""

ErrorResponses = Callable[..., dict[int | str, dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class _Api:
    """One document: the routes under `prefix`, with paths relative to it (its server)."""

    prefix: str
    title: str
    description: str
    errors: ErrorResponses  # what its routes declare their errors with


def install_openapi(app: FastAPI, max_upload_bytes: int) -> None:
    limit = megabytes(max_upload_bytes)
    native = _Api(
        NATIVE_PREFIX,
        app.title,
        f"{app.description}\n\n{_WEBSOCKETS} The OpenAI-compatible API under `/v1` has "
        f"[a document of its own]({DOCS_PAGE}?api=openai).",
        error_responses,
    )
    openai = _Api(
        OPENAI_PREFIX,
        f"{app.title}: OpenAI-compatible API",
        OPENAI_DESCRIPTION,
        openai_error_responses,
    )

    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _document(app, native, limit)
        return app.openapi_schema

    app.openapi = build  # type: ignore[method-assign]
    app.state.openai_openapi = functools.cache(lambda: _document(app, openai, limit))


def openai_document(app: FastAPI) -> dict[str, Any]:
    """The OpenAI-compatible API's document, as `install_openapi` built it."""
    build: Callable[[], dict[str, Any]] = app.state.openai_openapi
    return build()


def _document(app: FastAPI, api: _Api, limit: str) -> dict[str, Any]:
    routes = [
        route
        for route in iter_route_contexts(app.routes)
        if (route.path or "").startswith(f"{api.prefix}/")
    ]
    # A copy: the document holds the routes' own declarations, which every app shares.
    schema = copy.deepcopy(
        get_openapi(
            title=api.title,
            version=app.version,
            description=api.description,
            routes=routes,
            servers=[{"url": api.prefix}],
        )
    )
    _strip_path_prefix(schema, api.prefix)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for item in schema["paths"].values():
        for operation in item.values():
            _drop_framework_validation_error(operation)
            _declare_idempotency_conflict(operation, api.errors)
            _restore_error_examples(operation, api.errors)
            _hoist_definitions(operation, components)
            _optional_examples_in_schema(operation)
            if "413" in operation["responses"]:
                operation["responses"]["413"]["description"] = (
                    f"PAYLOAD_TOO_LARGE: the body exceeds the {limit} limit."
                )
            for response in operation["responses"].values():
                response.setdefault("headers", {}).update(_REQUEST_ID_HEADER)
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)
    return schema


def _strip_path_prefix(schema: dict[str, Any], prefix: str) -> None:
    # Paths are relative to the server URL, which carries the version prefix.
    schema["paths"] = {path.removeprefix(prefix): item for path, item in schema["paths"].items()}


def _drop_framework_validation_error(operation: dict[str, Any]) -> None:
    # Validation failures are 400 INVALID_REQUEST here, never FastAPI's 422.
    operation["responses"].pop("422", None)


def _declare_idempotency_conflict(operation: dict[str, Any], errors: ErrorResponses) -> None:
    """An operation that takes an Idempotency-Key can answer 409 while the key's first
    request runs: declared here, by the header, so that no such route can forget it."""
    names = {parameter["name"] for parameter in operation.get("parameters", [])}
    if "Idempotency-Key" not in names:
        return
    response = errors(IDEMPOTENCY_CONFLICT)[IDEMPOTENCY_CONFLICT]
    model = response.pop("model")
    response["content"]["application/json"]["schema"] = {"$ref": f"{COMPONENTS}{model.__name__}"}
    operation["responses"][str(IDEMPOTENCY_CONFLICT)] = response
    operation["responses"] = dict(sorted(operation["responses"].items()))


def _restore_error_examples(operation: dict[str, Any], errors: ErrorResponses) -> None:
    """The error examples as the service sends them: FastAPI drops their nulls (OpenAI's
    `"param": null`), which the bodies carry."""
    for status, response in operation["responses"].items():
        if int(status) >= 400:
            declared = errors(int(status))[int(status)]["content"]["application/json"]
            response["content"]["application/json"]["examples"] = declared["examples"]


def _hoist_definitions(operation: dict[str, Any], components: dict[str, Any]) -> None:
    """A JSON body's nested models (see `json_request_body`) into the components."""
    for media in operation.get("requestBody", {}).get("content", {}).values():
        for name, definition in media.get("schema", {}).pop("$defs", {}).items():
            if components.setdefault(name, definition) != definition:
                raise ValueError(f"Two models named {name} in one OpenAPI document.")


def _optional_examples_in_schema(operation: dict[str, Any]) -> None:
    """Swagger UI's "Try it out" fills a parameter in with its first example, so an optional
    one would be sent and change the answer (output_format: 44.1 kHz MP3 rather than the
    voice's own rate). Its examples stay, as its schema's (JSON Schema `examples`), which
    Swagger UI does not fill in."""
    for parameter in operation.get("parameters", []):
        named = None if parameter.get("required") else parameter.pop("examples", None)
        if named:
            parameter["schema"]["examples"] = [example["value"] for example in named.values()]
