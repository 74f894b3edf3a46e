"""One exception class per error code of the spec, and the one place that renders them.

Services raise these; only this module knows about statuses and error bodies
(`error_handlers` answers them with these bodies). Two bodies:
the spec's envelope, and OpenAI's error shape for the OpenAI-compatible API under /v1, so
that OpenAI's SDKs raise the error classes their users already handle.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar


class ApiError(Exception):
    status: ClassVar[int] = 500
    code: ClassVar[str] = "INTERNAL_ERROR"
    default_message: ClassVar[str] = "The service failed to handle the request."

    def __init__(
        self,
        message: str | None = None,
        *,
        headers: dict[str, str] | None = None,
        param: str | None = None,
    ):
        self.message = message or self.default_message
        # What a WebSocket session's error event says: a session bills what it delivered
        # before a failure, so what a request's message says of its billing is left out.
        self.what_failed = self.message
        self.headers = headers or {}
        self.param = param  # the offending request field, where one is to blame
        super().__init__(self.message)


class InvalidRequest(ApiError):
    status, code = 400, "INVALID_REQUEST"
    default_message = "The request failed validation."


class InvalidApiKey(ApiError):
    status, code = 401, "INVALID_API_KEY"
    default_message = "Missing, malformed, unknown or revoked API key."


class AccountSuspended(ApiError):
    status, code = 403, "ACCOUNT_SUSPENDED"
    default_message = "The account or organization is suspended."


class ServiceDisabled(ApiError):
    status, code = 403, "SERVICE_DISABLED"
    default_message = "This service is disabled for the account or organization."


class NotFound(ApiError):
    status, code = 404, "NOT_FOUND"
    default_message = "Not found."


class VoiceNotFound(NotFound):
    def __init__(self, voice_id: str) -> None:
        # The same text for an unknown id and for another organization's voice.
        super().__init__(f"No voice with id {voice_id!r}.")


class MethodNotAllowed(ApiError):
    # The spec has no code of its own for 405; the request is invalid for this path.
    status, code = 405, "INVALID_REQUEST"
    default_message = "Method not allowed."


class RequestTimeout(ApiError):
    # The spec has no code for a request that arrives too slowly: it is an invalid request.
    # 408 tells the client it may retry; the connection is closed, as RFC 9110 expects.
    status, code = 408, "INVALID_REQUEST"
    default_message = "The request was not received in time."


class PayloadTooLarge(ApiError):
    status, code = 413, "PAYLOAD_TOO_LARGE"
    default_message = "The request body exceeds the upload limit."


class UnsupportedMediaType(ApiError):
    status, code = 415, "UNSUPPORTED_MEDIA_TYPE"
    default_message = "Unsupported audio file."


class IdempotencyKeyInUse(ApiError):
    # Stripe's answer: the key's first request was still running after this one waited.
    status, code = 409, "IDEMPOTENCY_KEY_IN_USE"
    default_message = (
        "A request with this Idempotency-Key is still running; retry it with the same key "
        "to get its answer."
    )

    def __init__(self) -> None:
        super().__init__(headers={"Retry-After": "1"})


class RateLimited(ApiError):
    status, code = 429, "RATE_LIMITED"
    default_message = "Rate limit exceeded for this API key."


class InternalError(ApiError):
    pass


class ProviderError(ApiError):
    status, code = 502, "PROVIDER_ERROR"
    default_message = "The voice engine failed; the request is safe to retry."

    @classmethod
    def of(cls, what_failed: str) -> ProviderError:
        """A provider's failure: an HTTP request's answer adds what it says of its billing."""
        error = cls(f"{what_failed} The request was not billed and is safe to retry.")
        error.what_failed = what_failed
        return error


class NodeBusy(ProviderError):
    # Refused before any work: every inference worker is busy and the request's queue is
    # full. Another node, or this one a little later, can serve it.
    default_message = (
        "This node is busy: every inference worker is taken and its queue is full. "
        "The request is safe to retry; Retry-After says when."
    )

    def __init__(self, retry_after_seconds: int) -> None:
        super().__init__(headers={"Retry-After": str(retry_after_seconds)})


class ModelsInUse(NodeBusy):
    # Refused before any work: the model asked for is not loaded, and the models that fill
    # the node's memory budget are all in use. They are released within a transcription.
    default_message = (
        "This node's memory for models is taken by models in use. "
        "The request is safe to retry; Retry-After says when."
    )


class ClientClosedRequest(ApiError):
    # Never sent: the client is gone. It names the request-log row of a request abandoned
    # before its answer; 499 and the name are nginx's, which operators already know.
    status, code = 499, "CLIENT_CLOSED_REQUEST"
    default_message = "The client closed the connection before the request was complete."


STATUS_ERRORS: dict[int, type[ApiError]] = {
    cls.status: cls
    for cls in (InvalidRequest, NotFound, MethodNotAllowed, PayloadTooLarge, InternalError)
}


def envelope(code: str, message: str, request_id: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "request_id": request_id}}


OPENAI_PREFIX = "/v1"

# OpenAI's error types by status; its SDKs choose their exception class by status alone.
_OPENAI_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


def is_openai_path(path: str) -> bool:
    return path == OPENAI_PREFIX or path.startswith(OPENAI_PREFIX + "/")


def openai_error(error: ApiError) -> dict[str, Any]:
    if error.status >= 500:
        kind = "server_error"
    else:
        kind = _OPENAI_TYPES.get(error.status, "invalid_request_error")
    return {
        "error": {
            "message": error.message,
            "type": kind,
            "param": error.param,
            "code": error.code.lower(),  # INVALID_API_KEY is OpenAI's invalid_api_key
        }
    }


def envelope_bytes(error: ApiError, request_id: str, path: str = "") -> bytes:
    """The one serialization of an error body, whoever writes it (handler, middleware or
    server protocol): the shape of the API `path` belongs to, compact and UTF-8, as
    Starlette's JSONResponse writes success bodies. The request id is also in X-Request-ID."""
    body = (
        openai_error(error)
        if is_openai_path(path)
        else envelope(error.code, error.message, request_id)
    )
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def describe_errors(errors: Sequence[Any]) -> str:
    """One line naming each offending field, from pydantic's or FastAPI's error list."""
    parts = []
    for err in errors:
        location = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        parts.append(f"{location}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or InvalidRequest.default_message


def first_field(errors: Sequence[Any]) -> str | None:
    """The first offending field's name, as OpenAI's `param` names it."""
    for err in errors:
        location = [str(p) for p in err.get("loc", ()) if p not in ("body", "query", "path")]
        if location:
            return ".".join(location)
    return None


def session_message(error: ApiError) -> str:
    """What failed, for a WebSocket session's or a Wyoming connection's error event."""
    return error.what_failed
