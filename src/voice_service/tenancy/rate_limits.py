"""A key's limits as people type them, in the console's form or on the CLI."""

from __future__ import annotations

import re

# ASCII digits only: `str.isdigit` also takes superscripts (a superscript two, which
# `int` then refuses) and `int` other scripts' digits (Arabic-Indic or fullwidth "50" are
# 50), which no one means as a limit. Nine digits at most: the column is a 32-bit integer
# on PostgreSQL, and `int` refuses strings of over 4300 digits with a ValueError of its own.
_WHOLE_NUMBER = re.compile(r"[0-9]{1,9}")


class InvalidRateLimit(ValueError):
    pass


class InvalidUnitCap(ValueError):
    pass


def parse_unit_cap(text: str) -> int:
    """Billed units per month, a whole number from 0 written in ASCII digits."""
    if _WHOLE_NUMBER.fullmatch(text) is None:
        raise InvalidUnitCap(f"{text!r} is not a whole number of units.")
    return int(text)


def parse_rate_limit(text: str) -> int:
    """Requests per minute, a whole number from 1 written in ASCII digits."""
    if _WHOLE_NUMBER.fullmatch(text) is None or int(text) < 1:
        raise InvalidRateLimit(f"{text!r} is not a whole number of requests per minute from 1.")
    return int(text)
