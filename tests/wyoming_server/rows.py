"""The request-log and usage rows of a key, as the books hold them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tests.helpers.app import Tenants
from voice_service.core.models import RequestLogEntry, UsageRecord


@dataclass(frozen=True)
class Books:
    logged: list[RequestLogEntry]
    billed: list[UsageRecord]

    def of(self, request_id: str) -> list[UsageRecord]:
        return [row for row in self.billed if row.request_id == request_id]


async def books_of(tenants: Tenants, key_id: str) -> Books:
    async def read(session: AsyncSession) -> Books:
        logged = await session.scalars(
            select(RequestLogEntry)
            .where(RequestLogEntry.key_id == key_id)
            .order_by(RequestLogEntry.created_at)
        )
        billed = await session.scalars(select(UsageRecord).where(UsageRecord.key_id == key_id))
        return Books(list(logged), list(billed))

    return await tenants.run(read)


async def new_rows(tenants: Tenants, key_id: str, before: Books, count: int = 1) -> Books:
    """The rows the key gained since `before`, once `count` log rows have arrived (the
    request log is written in batches, a moment after the answer)."""
    seen = {row.request_id for row in before.logged}
    for _ in range(600):
        now = await books_of(tenants, key_id)
        logged = [row for row in now.logged if row.request_id not in seen]
        if len(logged) >= count:
            billed = [row for row in now.billed if row.request_id in {r.request_id for r in logged}]
            return Books(logged, billed)
        await asyncio.sleep(0.1)
    raise AssertionError(f"{count} new request-log rows never arrived")
