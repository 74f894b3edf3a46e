"""Shapes shared by every router: the error envelope and request-body helpers."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, Field, ValidationError

from voice_service.audio.formats import NATIVE_AUDIO
from voice_service.core.errors import (
    AccountSuspended,
    ApiError,
    IdempotencyKeyInUse,
    InternalError,
    InvalidApiKey,
    InvalidRequest,
    NodeBusy,
    NotFound,
    PayloadTooLarge,
    ProviderError,
    RateLimited,
    RequestTimeout,
    ServiceDisabled,
    UnsupportedMediaType,
    describe_errors,
    envelope,
    first_field,
    openai_error,
)

M = TypeVar("M", bound=BaseModel)

EXAMPLE_REQUEST_ID = "req_3f9c2b7d1e0a4c5b6a7d8e9f"
COMPONENTS = "#/components/schemas/"


class ErrorDetail(BaseModel):
    code: str = Field(description="One of the spec's codes; each status's examples show its own.")
    message: str
    request_id: str = Field(examples=[EXAMPLE_REQUEST_ID])


class Error(BaseModel):
    error: ErrorDetail


class OpenAIErrorDetail(BaseModel):
    message: str
    type: str = Field(
        description="OpenAI's error type, by status: invalid_request_error, "
        "authentication_error (401), permission_error (403), not_found_error (404), "
        "rate_limit_error (429), server_error (500, 502)."
    )
    param: str | None = Field(description="The offending request field, where one is to blame.")
    code: str = Field(description="The native API's code, lower-cased (invalid_api_key, ...).")


class OpenAIError(BaseModel):
    """OpenAI's error body, which its SDKs turn into their exception classes."""

    error: OpenAIErrorDetail


_DESCRIPTIONS = {
    400: "INVALID_REQUEST: the request failed validation.",
    401: "INVALID_API_KEY: key missing, malformed, unknown or revoked.",
    403: "ACCOUNT_SUSPENDED or SERVICE_DISABLED.",
    404: "NOT_FOUND: no such resource in the caller's organization.",
    408: "INVALID_REQUEST: the headers or body arrived too slowly; the connection is closed.",
    409: "IDEMPOTENCY_KEY_IN_USE: a request with this Idempotency-Key is still running; "
    "retry with the same key (Retry-After) to get its answer.",
    413: "PAYLOAD_TOO_LARGE: the body exceeds the upload limit.",
    415: "UNSUPPORTED_MEDIA_TYPE: not mp3, wav, m4a, webm or ogg.",
    429: "RATE_LIMITED: per-key rate limit exceeded; see Retry-After.",
    500: "INTERNAL_ERROR: failure on the service's side.",
    502: "PROVIDER_ERROR: the voice engine failed, or the node is busy (then with "
    "Retry-After); safe to retry.",
}
# Every authenticated route can answer these, whatever it does.
COMMON_ERRORS = (401, 403, 408, 413, 429, 500)
# A route that takes an Idempotency-Key can answer this too (see `openapi.py`).
IDEMPOTENCY_CONFLICT = 409


def _examples() -> dict[int, dict[str, ApiError]]:
    """What the service answers with each status, named, as the error classes word it (the
    reference's examples: a 401's shows INVALID_API_KEY, not the schema's first code)."""
    return {
        400: {"invalid_request": InvalidRequest()},
        401: {"invalid_api_key": InvalidApiKey()},
        403: {"account_suspended": AccountSuspended(), "service_disabled": ServiceDisabled()},
        404: {"not_found": NotFound()},
        408: {"request_timeout": RequestTimeout()},
        409: {"idempotency_key_in_use": IdempotencyKeyInUse()},
        413: {"payload_too_large": PayloadTooLarge()},
        415: {
            "unsupported_media_type": UnsupportedMediaType(
                f"Unsupported audio file (not audio). Accepted formats: {NATIVE_AUDIO.text}."
            )
        },
        429: {"rate_limited": RateLimited()},
        500: {"internal_error": InternalError()},
        502: {"provider_error": ProviderError(), "node_busy": NodeBusy(retry_after_seconds=5)},
    }


def _native_body(error: ApiError) -> dict[str, Any]:
    return envelope(error.code, error.message, EXAMPLE_REQUEST_ID)


def _responses(
    model: type[BaseModel], body: Callable[[ApiError], dict[str, Any]], statuses: tuple[int, ...]
) -> dict[int | str, dict[str, Any]]:
    examples = _examples()
    return {
        status: {
            "model": model,
            "description": _DESCRIPTIONS[status],
            "content": {
                "application/json": {
                    "examples": {
                        name: {"summary": name.replace("_", " ").capitalize(), "value": body(error)}
                        for name, error in examples[status].items()
                    }
                }
            },
        }
        for status in sorted({*COMMON_ERRORS, *statuses})
    }


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The native API's error statuses (the common ones and `statuses`), in the spec's
    envelope, each with examples of its own codes."""
    return _responses(Error, _native_body, statuses)


def openai_error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The same for the OpenAI-compatible API under /v1, in OpenAI's error shape."""
    return _responses(OpenAIError, openai_error, statuses)


def json_request_body(model: type[BaseModel]) -> dict[str, Any]:
    """OpenAPI for a JSON body that the route parses itself, after authentication. The
    models it nests stay in its `$defs`, which `openapi.py` moves to the components that
    its references name."""
    schema = model.model_json_schema(ref_template=f"{COMPONENTS}{{model}}")
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": schema}},
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
    """The request's body as `model`; a refusal says so when it was not sent as JSON."""
    body = await request.body()
    try:
        return parse_json_body(body, model)
    except InvalidRequest as exc:
        hint = not_json_hint(request)
        if hint is None:
            raise
        raise InvalidRequest(f"{exc.message.rstrip('.')}. {hint}", param=exc.param) from None


def not_json_hint(request: Request) -> str | None:
    """What to say of a body that failed as JSON when its Content-Type is not JSON (a form,
    as curl -d sends without -H); None when it is."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media == "application/json" or media.endswith("+json"):
        return None
    return (
        "The body is read as JSON: send it with Content-Type: application/json "
        f"(this request's is {media or 'missing'})."
    )


def parse_json_body(body: bytes, model: type[M]) -> M:
    """`body` as `model`, or the INVALID_REQUEST that says what is wrong with it."""
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
