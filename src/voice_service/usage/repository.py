"""Usage records: the billable units of successful requests."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.auth.principal import Principal
from voice_service.models import UsageRecord


def record_usage(
    session: AsyncSession, principal: Principal, request_id: str, endpoint: str, units: int
) -> None:
    """Add the record to the caller's transaction: it commits with the success or not at all."""
    session.add(
        UsageRecord(
            request_id=request_id,
            org_id=principal.org_id,
            key_id=principal.key_id,
            endpoint=endpoint,
            units=units,
        )
    )


async def usage_for_org(session: AsyncSession, org_id: str) -> Sequence[UsageRecord]:
    result = await session.scalars(
        select(UsageRecord)
        .where(UsageRecord.org_id == org_id)
        .order_by(UsageRecord.created_at, UsageRecord.request_id)
    )
    return result.all()
