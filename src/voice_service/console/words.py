"""How the console writes counts in words, in pages and in the chart alike."""

from __future__ import annotations


def noun(count: int, singular: str) -> str:
    """The noun for `count` of it: "unit" for one, "units" for none or several."""
    return singular if count == 1 else f"{singular}s"


def quantity(count: int, singular: str) -> str:
    """A count as the console writes it, with its noun: "1 unit", "5,000 units"."""
    return f"{count:,} {noun(count, singular)}"
