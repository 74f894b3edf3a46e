"""GET /usage bodies: by endpoint (the default), by key, or by voice."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field

from voice_service.books.usage.report import (
    Breakdown,
    EndpointUsage,
    GroupedUsage,
    RequestUsage,
)
from voice_service.books.usage.tallies import DailyUsage, GroupUsage
from voice_service.core.models import UsageRecord
from voice_service.voices.schemas import Timestamp


class DailyUsageRow(BaseModel):
    date: date
    endpoint: str = Field(examples=["text-to-speech"])
    units: int
    requests: int

    @classmethod
    def of(cls, row: DailyUsage) -> DailyUsageRow:
        return cls(date=row.day, endpoint=row.endpoint, units=row.units, requests=row.requests)


class KeyRef(BaseModel):
    id: str
    prefix: str = Field(description="The key's display prefix, as `keys list` shows it.")
    name: str | None


class KeyUsageRow(BaseModel):
    date: date
    key: KeyRef
    units: int
    requests: int

    @classmethod
    def of(cls, g: GroupUsage) -> KeyUsageRow:
        key = KeyRef(id=g.id, prefix=g.label or "", name=g.name)
        return cls(date=g.day, key=key, units=g.units, requests=g.requests)


class VoiceRef(BaseModel):
    id: str
    name: str | None


class VoiceUsageRow(BaseModel):
    date: date
    voice: VoiceRef
    units: int
    requests: int

    @classmethod
    def of(cls, g: GroupUsage) -> VoiceUsageRow:
        voice = VoiceRef(id=g.id, name=g.label)
        return cls(date=g.day, voice=voice, units=g.units, requests=g.requests)


class RequestUsageRow(BaseModel):
    date: date
    request_id: str = Field(description="The request, as `/requests/{id}` shows it.")
    created_at: Timestamp
    endpoint: str = Field(examples=["text-to-speech"])
    units: int
    key_id: str
    voice_id: str | None = Field(description="The voice that spoke or was cloned, if any.")

    @classmethod
    def of(cls, record: UsageRecord) -> RequestUsageRow:
        return cls(
            date=record.created_at.date(),
            request_id=record.request_id,
            created_at=record.created_at,
            endpoint=record.endpoint,
            units=record.units,
            key_id=record.key_id,
            voice_id=record.voice_id,
        )


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

    @classmethod
    def of(cls, breakdown: Breakdown) -> UsageReport:
        # `next` is left unset, not null, where the grouping comes whole.
        if isinstance(breakdown, RequestUsage):
            rows = [RequestUsageRow.of(record) for record in breakdown.records]
            return cls(usage=rows, totals=breakdown.totals, next=breakdown.next)
        if isinstance(breakdown, EndpointUsage):
            return cls(usage=[DailyUsageRow.of(r) for r in breakdown.rows], totals=breakdown.totals)
        return cls(usage=_group_rows(breakdown), totals=breakdown.totals)


def _group_rows(grouped: GroupedUsage) -> list[KeyUsageRow] | list[VoiceUsageRow]:
    if grouped.grouping == "key":
        return [KeyUsageRow.of(g) for g in grouped.groups]
    return [VoiceUsageRow.of(g) for g in grouped.groups]
