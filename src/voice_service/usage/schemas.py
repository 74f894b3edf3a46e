"""GET /usage bodies: by endpoint (the default), by key, or by voice."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field


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


class UsageReport(BaseModel):
    usage: list[DailyUsageRow] | list[KeyUsageRow] | list[VoiceUsageRow]
    totals: dict[str, int] = Field(
        description="Units over the period per endpoint, key id or voice id (`group_by`)."
    )
