"""Keyset paging, newest first: the request log and the jobs list page the same way, in one
total order (created_at, then the row's id, both descending), each page continuing strictly
after the row its cursor names, so rows added meanwhile never shift a page."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar, TypeVarTuple

from sqlalchemy import Select, tuple_
from sqlalchemy.orm import InstrumentedAttribute

Ts = TypeVarTuple("Ts")
T = TypeVar("T")


class UnknownCursor(LookupError):
    """`before` names no row of the organization."""


def newest_first(
    query: Select[*Ts],
    created_at: InstrumentedAttribute[datetime],
    key: InstrumentedAttribute[Any],
    *,
    after: tuple[datetime, str] | None,
    limit: int,
) -> Select[*Ts]:
    """`query`'s rows from strictly after the row `after` names (its created_at and key),
    one past `limit`: `page_of` tells from it whether older rows follow."""
    if after is not None:
        query = query.where(tuple_(created_at, key) < tuple_(*after))
    return query.order_by(created_at.desc(), key.desc()).limit(limit + 1)


def page_of(rows: Sequence[T], limit: int) -> tuple[list[T], bool]:
    """The page, and whether more rows follow it."""
    return list(rows[:limit]), len(rows) > limit
