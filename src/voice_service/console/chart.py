"""The usage chart: units per day, one stacked bar per day, drawn as SVG on the server
(no script, no chart library; presentation attributes, since the CSP forbids inline style)."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from markupsafe import Markup, escape

from voice_service.books.usage.tallies import DailyUsage
from voice_service.console.words import quantity
from voice_service.core.vocabulary import UsageEndpoint

LEFT, RIGHT, TOP, BOTTOM = 48, 12, 12, 28
PALETTE = ("#4f46e5", "#0891b2", "#16a34a", "#d97706", "#db2777", "#7c3aed", "#64748b")
GRID_LINES = 4


@dataclass(frozen=True, slots=True)
class Frame:
    """A drawing's size in its own units, which the browser scales to the card's width, and
    how many days are labelled under it."""

    width: int
    height: int
    day_labels: int
    css_class: str


# An SVG's text scales with the drawing: a laptop's card shows the wide one at about its own
# size, but a phone's would shrink it, labels and all, to well under half. The stylesheet
# shows the drawing that suits the card's width.
WIDE = Frame(760, 260, 8, "chart-wide")
NARROW = Frame(320, 200, 4, "chart-narrow")


# Usage is listed, stacked and coloured in the vocabulary's order.
_KNOWN = [endpoint.value for endpoint in UsageEndpoint]


def _rank(endpoint: str) -> tuple[int, str]:
    # An endpoint the vocabulary does not name (an older release's) goes last, by name.
    return (_KNOWN.index(endpoint), "") if endpoint in _KNOWN else (len(_KNOWN), endpoint)


def endpoint_order(endpoints: Iterable[str]) -> list[str]:
    """The distinct `endpoints` in the vocabulary's order, whichever was used first."""
    return sorted(set(endpoints), key=_rank)


def endpoint_colours(endpoints: Iterable[str]) -> dict[str, str]:
    """Each endpoint's colour, in the page's order; a known endpoint's colour is the same
    whatever else the period holds."""
    ordered = endpoint_order(endpoints)
    others = itertools.count(len(_KNOWN))
    return {
        e: PALETTE[(_KNOWN.index(e) if e in _KNOWN else next(others)) % len(PALETTE)]
        for e in ordered
    }


def usage_chart(rows: Sequence[DailyUsage], start: date, end: date) -> Markup:
    """Units per day, one stacked bar a day, drawn for a wide card and for a narrow one."""
    days = [start + timedelta(days=i) for i in range((end - start).days + 1)]
    stacks: dict[date, dict[str, int]] = defaultdict(dict)
    for row in rows:
        stacks[row.day][row.endpoint] = row.units
    colours = endpoint_colours([row.endpoint for row in rows])
    top = _nice_ceiling(max((sum(s.values()) for s in stacks.values()), default=0))
    return Markup("").join(_drawn(frame, days, stacks, colours, top) for frame in (WIDE, NARROW))


def _drawn(
    frame: Frame,
    days: list[date],
    stacks: dict[date, dict[str, int]],
    colours: dict[str, str],
    top: int,
) -> Markup:
    parts = [
        f'<svg class="chart {frame.css_class}" viewBox="0 0 {frame.width} {frame.height}" '
        'role="img" aria-label="Units per day" xmlns="http://www.w3.org/2000/svg">',
        "<title>Units per day</title>",
        *_grid(frame, top),
    ]
    slot = (frame.width - LEFT - RIGHT) / len(days)
    label_every = max(1, math.ceil(len(days) / frame.day_labels))
    for index, day in enumerate(days):
        x = LEFT + index * slot
        parts += _bars(frame, x, slot, day, stacks.get(day, {}), colours, top)
        if index % label_every == 0:
            parts.append(
                f'<text x="{x + slot / 2:.1f}" y="{frame.height - 8}" text-anchor="middle" '
                f'font-size="11" fill="#64748b">{day:%b %d}</text>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 (every interpolated text is escaped or ours)


def _grid(frame: Frame, top: int) -> list[str]:
    """The horizontal lines, each with its number of units on the left."""
    plot_h = frame.height - TOP - BOTTOM
    lines = []
    for i in range(GRID_LINES + 1):
        y = TOP + plot_h - plot_h * i / GRID_LINES
        lines.append(
            f'<line x1="{LEFT}" x2="{frame.width - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
            'stroke="#e2e8f0" stroke-width="1"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11" '
            f'fill="#64748b">{_short(top * i // GRID_LINES)}</text>'
        )
    return lines


def _bars(
    frame: Frame,
    x: float,
    slot: float,
    day: date,
    stack: dict[str, int],
    colours: dict[str, str],
    top: int,
) -> list[str]:
    """One day's bar: its endpoints' units stacked from the bottom, in the page's order."""
    plot_h = frame.height - TOP - BOTTOM
    base: float = TOP + plot_h
    bars = []
    for endpoint in endpoint_order(stack):
        height = plot_h * stack[endpoint] / top if top else 0
        base -= height
        title = f"{day.isoformat()} {escape(endpoint)}: {quantity(stack[endpoint], 'unit')}"
        bars.append(
            f'<rect x="{x + slot * 0.15:.1f}" y="{base:.1f}" width="{slot * 0.7:.1f}" '
            f'height="{height:.1f}" fill="{colours[endpoint]}" rx="2">'
            f"<title>{title}</title></rect>"
        )
    return bars


def _nice_ceiling(value: int) -> int:
    """The axis top: 1, 2 or 5 times a power of ten, at least `value` (and at least 4)."""
    if value <= GRID_LINES:
        return GRID_LINES
    magnitude: int = 10 ** math.floor(math.log10(value))
    return next(step * magnitude for step in (1, 2, 5, 10) if step * magnitude >= value)


def _short(value: int) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return str(value)
