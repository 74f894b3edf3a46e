"""What a page of the request log shows, and what it may be filtered by."""

from __future__ import annotations

from dataclasses import dataclass

from voice_service.core.models import RequestLogEntry

STATUS_CLASSES = ("2xx", "4xx", "5xx")
# Filterable endpoints: a row's path ends with "/" and one of these, whether the API
# (/api/v1/text-to-speech) or the console acting for the organization served it.
ENDPOINTS = (
    "text-to-speech",
    "speech-to-text",
    "asr",
    "text-to-speech/stream",
    "text-to-speech/with-timestamps",
    "text-to-speech/with-timestamps/stream",
    "realtime",  # live transcription sessions, on both APIs
    "voices",
    "voices/clone",
    "usage",
    "requests",
    # The OpenAI-compatible API (/v1/...).
    "audio/speech",
    "audio/transcriptions",
    "audio/translations",
    "models",
)


@dataclass(frozen=True, slots=True)
class BilledRequest:
    """A request's log row and what it was billed: 0 units and no endpoint when it was not
    (a failure, a replay, a request that does no billable work)."""

    entry: RequestLogEntry
    units: int
    endpoint: str | None


@dataclass(frozen=True, slots=True)
class LogQuery:
    """A page of the log to read: at most `limit` rows, newest first, older than the row
    `before` names, of one status class and one endpoint where given."""

    limit: int
    before: str | None = None
    status_class: str | None = None
    endpoint: str | None = None
