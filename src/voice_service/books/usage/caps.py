"""Monthly unit caps: billed units per UTC calendar month, for a key and its organization.

A request whose units would pass a cap is refused before any work. The check and the hold
on its units are one transaction that first takes the organization row's lock (a no-op
UPDATE: the row lock on PostgreSQL, the write lock on SQLite), so of two requests racing
for the last units, on any node, the second counts the first's hold. A hold lives until
the request is billed (its usage row replaces it, in the same transaction) or ends
otherwise (dropped); one that a crash left behind stops counting after `HOLD_LIFETIME`, or
at its own `lasts_until` (a transcription job's, which lives until the job ends).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import ColumnElement, ScalarSelect, and_, delete, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.errors import RateLimited
from voice_service.core.models import ApiKey, Organization, UnitHold, UsageRecord
from voice_service.tenancy.principal import Principal

# Longer than any request lives (the inference timeout's default is far shorter), so a
# hold still counts while its request could still be billed.
HOLD_LIFETIME = timedelta(hours=6)
UNITS_REMAINING = "X-Units-Remaining"  # the response header


def month_start(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def next_month_start(now: datetime) -> datetime:
    start = month_start(now)
    if start.month == 12:
        return start.replace(year=start.year + 1, month=1)
    return start.replace(month=start.month + 1)


@dataclass(frozen=True, slots=True)
class Held:
    """The units a request holds, and what its tightest cap leaves after them."""

    units: int
    remaining: int


async def hold_units(
    session: AsyncSession,
    principal: Principal,
    request_id: str,
    units: int,
    now: datetime,
    lasts_until: datetime | None = None,
) -> Held | None:
    """Hold `units` for the request against its caps (instead of what it held before), or
    raise `RateLimited` (nothing held)
    naming the cap it would pass, with `Retry-After` until the month turns. None when no
    cap applies (any more: the caller saw one on a cached key). The hold counts until it is
    dropped, or at most `HOLD_LIFETIME` (until `lasts_until`, if given)."""
    await session.execute(
        update(Organization)
        .where(Organization.id == principal.org_id)
        .values(monthly_units=Organization.monthly_units)
    )
    org_cap, key_cap = (
        await session.execute(
            select(Organization.monthly_units, ApiKey.monthly_units)
            .join(ApiKey, ApiKey.org_id == Organization.id)
            .where(ApiKey.id == principal.key_id)
        )
    ).one()
    since = month_start(now)
    await session.execute(
        delete(UnitHold).where(
            UnitHold.org_id == principal.org_id,
            or_(
                and_(UnitHold.lasts_until.is_(None), UnitHold.created_at < now - HOLD_LIFETIME),
                UnitHold.lasts_until < now,
            ),
        )
    )
    await drop_hold(session, request_id)  # a request raising its own hold (a live session)
    caps = []
    if key_cap is not None:
        key = principal.key_id
        caps.append(("this API key", key_cap, UsageRecord.key_id == key, UnitHold.key_id == key))
    if org_cap is not None:
        org = principal.org_id
        caps.append(
            ("this organization", org_cap, UsageRecord.org_id == org, UnitHold.org_id == org)
        )
    if not caps:
        return None
    remaining = []
    for whose, cap, billed_here, held_here in caps:
        # One statement, so one snapshot: read in two, a request billed in between (its
        # hold dropped and its usage row added in one commit) would be in neither sum.
        used = int(
            await session.scalar(select(_billed(billed_here, since) + _held(held_here))) or 0
        )
        if used + units > cap:
            raise _refusal(whose, cap, used, units, now)
        remaining.append(cap - used - units)
    session.add(
        UnitHold(
            request_id=request_id,
            org_id=principal.org_id,
            key_id=principal.key_id,
            units=units,
            created_at=now,
            lasts_until=lasts_until,
        )
    )
    return Held(units, min(remaining))


async def drop_hold(session: AsyncSession, request_id: str) -> None:
    await session.execute(delete(UnitHold).where(UnitHold.request_id == request_id))


def _billed(which: ColumnElement[bool], since: datetime) -> ScalarSelect[int]:
    units = func.coalesce(func.sum(UsageRecord.units), 0)
    return select(units).where(which, UsageRecord.created_at >= since).scalar_subquery()


def _held(which: ColumnElement[bool]) -> ScalarSelect[int]:
    return select(func.coalesce(func.sum(UnitHold.units), 0)).where(which).scalar_subquery()


def _refusal(whose: str, cap: int, used: int, units: int, now: datetime) -> RateLimited:
    retry_after = math.ceil((next_month_start(now) - now).total_seconds())
    left = max(0, cap - used)
    return RateLimited(
        f"The monthly cap of {cap} units for {whose} would be passed: {left} left this month, "
        f"this request needs {units}.",
        headers={"Retry-After": str(max(1, retry_after)), UNITS_REMAINING: str(left)},
    )
