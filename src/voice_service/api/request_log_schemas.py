"""GET /requests bodies."""

from __future__ import annotations

from pydantic import BaseModel, Field

from voice_service.books.requestlog.pages import BilledRequest
from voice_service.voices.schemas import Timestamp


class LoggedRequest(BaseModel):
    request_id: str = Field(examples=["req_3f9c2b7d1e0a4c5b6a7d8e9f"])
    method: str
    path: str
    status: int
    error_code: str | None
    duration_ms: int
    created_at: Timestamp
    bytes_sent: int | None = Field(
        description="Bytes of a streamed response delivered before it ended; null when "
        "the response was not streamed."
    )
    replayed: bool = Field(
        description="A retry with an Idempotency-Key answered with the first request's "
        "stored answer; never billed."
    )
    resource_id: str | None = Field(
        description="What the request made that outlives it: a transcription job's id; "
        "null for most requests.",
        examples=["job_8d2e4f6a1b3c5d7e9f0a1b2c"],
    )
    model: str | None = Field(
        description="The transcription model that heard its audio, or provider:NAME for "
        "a provider's; null for requests that transcribe nothing.",
        examples=["large-v3-turbo"],
    )
    units: int = Field(
        description="The units billed for this request, as /usage counts them: 0 when it "
        "was not billed (a failure, a replay), a WebSocket session's once it ended.",
        examples=[42],
    )
    billed_endpoint: str | None = Field(
        description="The usage endpoint its units were billed under; null when none were.",
        examples=["text-to-speech"],
    )

    @classmethod
    def of(cls, billed: BilledRequest) -> LoggedRequest:
        row = billed.entry
        return cls(
            request_id=row.request_id,
            method=row.method,
            path=row.path,
            status=row.status,
            error_code=row.error_code,
            duration_ms=row.duration_ms,
            created_at=row.created_at,
            bytes_sent=row.bytes_sent,
            replayed=row.replayed,
            resource_id=row.resource_id,
            model=row.model,
            units=billed.units,
            billed_endpoint=billed.endpoint,
        )


class RequestList(BaseModel):
    requests: list[LoggedRequest]
    next: str | None = Field(
        description="Pass as `before` for the next (older) page; null on the last page."
    )
