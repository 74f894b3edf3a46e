"""The period a usage report covers: inclusive UTC days, bounded."""

from __future__ import annotations

import re
from datetime import date, timedelta

from voice_service.core.models import utcnow

DEFAULT_DAYS = 30
MAX_DAYS = 366  # a bound on what one query may add up


DAY_PATTERN = r"^\d{4}-\d{2}-\d{2}$"


class InvalidPeriod(ValueError):
    pass


def parse_day(value: str | None) -> date | None:
    """A YYYY-MM-DD day, strictly: no timestamps, no other ISO forms."""
    if not value:
        return None
    try:
        if re.fullmatch(DAY_PATTERN, value) is None:
            raise ValueError(value)
        return date.fromisoformat(value)
    except ValueError:
        raise InvalidPeriod(f"{value!r} is not a day written YYYY-MM-DD.") from None


def usage_period(start: date | None, end: date | None) -> tuple[date, date]:
    """By default the 30 days ending today (or ending `end`)."""
    last = end or utcnow().date()
    if start is not None:
        first = start
    elif last - date.min < timedelta(days=DEFAULT_DAYS - 1):
        raise InvalidPeriod(
            f"A period of {DEFAULT_DAYS} days cannot end on {last.isoformat()}: "
            f"it would start before {date.min.isoformat()}."
        )
    else:
        first = last - timedelta(days=DEFAULT_DAYS - 1)
    if first > last:
        raise InvalidPeriod("The period starts after it ends.")
    if (last - first).days >= MAX_DAYS:
        raise InvalidPeriod(f"The period spans more than {MAX_DAYS} days.")
    return first, last


def parse_period(start: str | None, end: str | None) -> tuple[date, date]:
    """The period from its first and last days as written, YYYY-MM-DD, either left out."""
    return usage_period(parse_day(start), parse_day(end))
