"""What a success costs: computed by the service that does the work, billed by the ledger."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Charge:
    """`units` under `endpoint`, for `voice_id` when a voice spoke."""

    endpoint: str
    units: int
    voice_id: str | None = None
