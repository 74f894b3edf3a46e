"""GET /usage bodies: by endpoint (the default), by key, or by voice."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field

from voice_service.voices.schemas import Timestamp


class DailyUsageRow(BaseModel):
    date: date
    endpoint: str = Field(examples=["text-to-speech"])
    units: int
    requests: int


class KeyRef(BaseModel):
    id: str
    prefix: str = Field(description="The key's display prefix, as `keys list` shows it.")
    name: str | None


class KeyUsageRow(BaseModel):
    date: date
    key: KeyRef
    units: int
    requests: int


class VoiceRef(BaseModel):
    id: str
    name: str | None


class VoiceUsageRow(BaseModel):
    date: date
    voice: VoiceRef
    units: int
    requests: int


class RequestUsageRow(BaseModel):
    date: date
    request_id: str = Field(description="The request, as `/requests/{id}` shows it.")
    created_at: Timestamp
    endpoint: str = Field(examples=["text-to-speech"])
    units: int
    key_id: str
    voice_id: str | None = Field(description="The voice that spoke or was cloned, if any.")


class UsageReport(BaseModel):
    usage: list[DailyUsageRow] | list[KeyUsageRow] | list[VoiceUsageRow] | list[RequestUsageRow]
    totals: dict[str, int] = Field(
        description="Units over the period per endpoint, key id or voice id (`group_by`); "
        "per endpoint, over the whole period, for `group_by=request`."
    )
    next: str | None = Field(
        None,
        description="`group_by=request` only: pass as `after` for the next page; null on "
        "the last page (the other groupings come whole).",
    )
