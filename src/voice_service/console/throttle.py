"""Sign-in throttling per email, shared by every node through the database.

Five failures in a row are free (typos); from then on each failure makes the email wait,
twice as long each time, up to a cap. The wait applies to unknown emails too, so that the
answers never tell which emails exist.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.models import SignInThrottle, utcnow

FREE_FAILURES = 5
FIRST_DELAY_SECONDS = 30
MAX_DELAY_SECONDS = 15 * 60
# An email that has not failed for this long starts afresh; its row is deleted, so rows
# for made-up emails do not pile up.
FORGET_AFTER = timedelta(days=1)


def delay_after(failures: int) -> timedelta:
    if failures < FREE_FAILURES:
        return timedelta(0)
    doubling = min(failures - FREE_FAILURES, 10)  # bounded before the cap applies
    return timedelta(seconds=min(FIRST_DELAY_SECONDS * 2**doubling, MAX_DELAY_SECONDS))


async def retry_at(session: AsyncSession, email: str) -> datetime | None:
    """When `email` may try again, if it must wait now."""
    when = await session.scalar(
        select(SignInThrottle.retry_at).where(SignInThrottle.email == email)
    )
    return when if when is not None and when > utcnow() else None


async def record_failure(session: AsyncSession, email: str) -> int:
    """Count a failure (atomically, whichever node sees it); returns the count so far."""
    now = utcnow()
    await session.execute(
        delete(SignInThrottle).where(SignInThrottle.last_failed_at < now - FORGET_AFTER)
    )
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    counted = (
        insert(SignInThrottle)
        .values(email=email, failures=1, retry_at=None, last_failed_at=now)
        .on_conflict_do_update(
            index_elements=[SignInThrottle.email],
            set_={"failures": SignInThrottle.failures + 1, "last_failed_at": now},
        )
        .returning(SignInThrottle.failures)
    )
    failures: int = (await session.execute(counted)).scalar_one()
    delay = delay_after(failures)
    if delay:
        await session.execute(
            update(SignInThrottle).where(SignInThrottle.email == email).values(retry_at=now + delay)
        )
    return failures


async def clear(session: AsyncSession, email: str) -> None:
    await session.execute(delete(SignInThrottle).where(SignInThrottle.email == email))
