"""A period's usage added up: per day and endpoint, or per day and key or voice."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date


@dataclass(frozen=True, slots=True)
class DailyUsage:
    day: date
    endpoint: str
    units: int
    requests: int


@dataclass(frozen=True, slots=True)
class GroupUsage:
    """A day's units of one key or one voice: its id and what people call it."""

    day: date
    id: str
    label: str | None  # a key's prefix, a voice's name
    name: str | None  # a key's name
    units: int
    requests: int


def totals(rows: Sequence[DailyUsage]) -> dict[str, int]:
    """Units per endpoint over `rows`."""
    return _summed((row.endpoint, row.units) for row in rows)


def group_totals(groups: Sequence[GroupUsage]) -> dict[str, int]:
    """Units per key or voice id over `groups`."""
    return _summed((group.id, group.units) for group in groups)


def _summed(pairs: Iterable[tuple[str, int]]) -> dict[str, int]:
    summed: dict[str, int] = {}
    for name, units in pairs:
        summed[name] = summed.get(name, 0) + units
    return dict(sorted(summed.items()))
