"""Shapes shared by every router: the error envelope and request-body helpers."""

from __future__ import annotations

from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, Field, ValidationError

from voice_service.errors import InvalidRequest, describe_errors

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
    413: "PAYLOAD_TOO_LARGE: the body exceeds the 25 MB cap.",
    415: "UNSUPPORTED_MEDIA_TYPE: not mp3, wav, m4a, webm or ogg.",
    429: "RATE_LIMITED: per-key rate limit exceeded; see Retry-After.",
    500: "INTERNAL_ERROR: failure on the service's side.",
    502: "PROVIDER_ERROR: the voice engine failed; safe to retry.",
}
# Every authenticated route can answer these, whatever it does.
COMMON_ERRORS = (401, 403, 413, 429, 500)


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
    try:
        return model.model_validate_json(await request.body())
    except ValidationError as exc:
        raise InvalidRequest(describe_errors(exc.errors(include_url=False))) from None
