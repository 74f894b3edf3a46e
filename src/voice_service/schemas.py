"""Shapes shared by every router: the error envelope and request-body helpers."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, Field, ValidationError

from voice_service.errors import InvalidRequest, describe_errors, first_field

M = TypeVar("M", bound=BaseModel)


class ErrorDetail(BaseModel):
    code: str = Field(examples=["INVALID_REQUEST"])
    message: str
    request_id: str = Field(examples=["req_3f9c2b7d1e0a4c5b6a7d8e9f"])


class Error(BaseModel):
    error: ErrorDetail


_DESCRIPTIONS = {
    400: "INVALID_REQUEST: the request failed validation.",
    401: "INVALID_API_KEY: key missing, malformed, unknown or revoked.",
    403: "ACCOUNT_SUSPENDED or SERVICE_DISABLED.",
    404: "NOT_FOUND: no such resource in the caller's organization.",
    408: "INVALID_REQUEST: the headers or body arrived too slowly; the connection is closed.",
    413: "PAYLOAD_TOO_LARGE: the body exceeds the upload limit.",
    415: "UNSUPPORTED_MEDIA_TYPE: not mp3, wav, m4a, webm or ogg.",
    429: "RATE_LIMITED: per-key rate limit exceeded; see Retry-After.",
    500: "INTERNAL_ERROR: failure on the service's side.",
    502: "PROVIDER_ERROR: the voice engine failed, or the node is busy (then with "
    "Retry-After); safe to retry.",
}
# Every authenticated route can answer these, whatever it does.
COMMON_ERRORS = (401, 403, 408, 413, 429, 500)


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {
        status: {"model": Error, "description": _DESCRIPTIONS[status]}
        for status in sorted({*COMMON_ERRORS, *statuses})
    }


def json_request_body(model: type[BaseModel]) -> dict[str, Any]:
    """OpenAPI for a JSON body that the route parses itself, after authentication."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": model.model_json_schema()}},
        }
    }


def multipart_request_body(
    properties: dict[str, dict[str, Any]], required: list[str]
) -> dict[str, Any]:
    """OpenAPI for a multipart body that the route parses itself, after authentication."""
    return {
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": {"type": "object", "properties": properties, "required": required}
                }
            },
        }
    }


async def parse_json(request: Request, model: type[M]) -> M:
    body = await request.body()
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        if errors[0]["type"] == "json_invalid" and _holds_lone_surrogate(body):
            raise InvalidRequest(
                "body: a string is not valid Unicode: it holds a lone UTF-16 surrogate "
                "escape (\\ud800-\\udfff must come in high-low pairs)."
            ) from None
        raise InvalidRequest(describe_errors(errors), param=first_field(errors)) from None


def _holds_lone_surrogate(body: bytes) -> bool:
    """pydantic refuses JSON escapes of lone surrogates as "unexpected end of hex escape";
    Python's own parser accepts them, so a body it parses into such a string is that case."""
    try:
        return _has_surrogate(json.loads(body))
    except (ValueError, RecursionError):
        return False


def _has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any("\ud800" <= char <= "\udfff" for char in value)
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_surrogate(item) for item in value)
    return False
