"""The published interface description: version 1.0.0, every status with the Error schema,
the upload limit as this node enforces it."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from voice_service.vocabulary import megabytes

_REQUEST_ID_HEADER = {
    "X-Request-ID": {
        "description": "Identifier of this request's log row (req_<token>).",
        "schema": {"type": "string", "pattern": "^req_[A-Za-z0-9]+$"},
    }
}


def install_openapi(app: FastAPI, max_upload_bytes: int) -> None:
    too_large = f"PAYLOAD_TOO_LARGE: the body exceeds the {megabytes(max_upload_bytes)} limit."

    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
                servers=[{"url": "/api/v1"}],
            )
            _strip_path_prefix(schema, "/api/v1")
            for operation in _operations(schema):
                _drop_framework_validation_error(operation)
                if "413" in operation["responses"]:
                    operation["responses"]["413"]["description"] = too_large
                for response in operation["responses"].values():
                    response.setdefault("headers", {}).update(_REQUEST_ID_HEADER)
            components = schema.get("components", {}).get("schemas", {})
            for name in ("HTTPValidationError", "ValidationError"):
                components.pop(name, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = build  # type: ignore[method-assign]


def _strip_path_prefix(schema: dict[str, Any], prefix: str) -> None:
    # Paths are relative to the server URL, which carries the version prefix.
    schema["paths"] = {path.removeprefix(prefix): item for path, item in schema["paths"].items()}


def _operations(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [op for item in schema["paths"].values() for op in item.values()]


def _drop_framework_validation_error(operation: dict[str, Any]) -> None:
    # Validation failures are 400 INVALID_REQUEST here, never FastAPI's 422.
    operation["responses"].pop("422", None)
