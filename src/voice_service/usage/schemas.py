"""GET /usage bodies."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field


class DailyUsageRow(BaseModel):
    date: date
    endpoint: str = Field(examples=["text-to-speech"])
    units: int
    requests: int


class UsageReport(BaseModel):
    usage: list[DailyUsageRow]
    totals: dict[str, int] = Field(description="Units per endpoint over the period.")
