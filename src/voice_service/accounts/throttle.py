"""Sign-in throttling per account (or unknown email), shared by every node through the
database.

Five failures in a row are free (typos); from then on each failure makes the subject wait,
twice as long each time, up to a cap. Unknown emails are throttled too, so that the answers
never tell which emails exist. An attempt is reserved before its password is checked and
counts as a failure until it succeeds: parallel attempts cannot all slip in before the
first of them fails.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.models import SignInThrottle, User, utcnow
from voice_service.kit.db import insert_if_absent

FREE_FAILURES = 5
FIRST_DELAY_SECONDS = 30
MAX_DELAY_SECONDS = 15 * 60
# A subject that has not failed for this long starts afresh; its row is deleted, so rows
# for made-up emails do not pile up.
FORGET_AFTER = timedelta(days=1)


def subject(user: User | None, email: str) -> str:
    """What attempts are counted against: the account the email found, else the email."""
    return f"user:{user.id}" if user is not None else f"email:{email}"


def delay_after(failures: int) -> timedelta:
    if failures < FREE_FAILURES:
        return timedelta(0)
    doubling = min(failures - FREE_FAILURES, 10)  # bounded before the cap applies
    return timedelta(seconds=min(FIRST_DELAY_SECONDS * 2**doubling, MAX_DELAY_SECONDS))


async def reserve(session: AsyncSession, key: str) -> datetime | None:
    """Count an attempt for `key` as a failure before it is checked; None when it may go
    ahead, else when the next may. Atomic across nodes: the first statement writes, which
    takes SQLite's write lock for the transaction, and PostgreSQL locks the row."""
    now = utcnow()
    await session.execute(
        delete(SignInThrottle).where(SignInThrottle.last_failed_at < now - FORGET_AFTER)
    )
    await session.execute(
        insert_if_absent(session.get_bind().dialect, SignInThrottle).values(
            subject=key, failures=0, retry_at=None, last_failed_at=now
        )
    )
    failures, retry_at = (
        await session.execute(
            select(SignInThrottle.failures, SignInThrottle.retry_at)
            .where(SignInThrottle.subject == key)
            .with_for_update()
        )
    ).one()
    if retry_at is not None and retry_at > now:
        return retry_at
    failures += 1
    delay = delay_after(failures)
    await session.execute(
        update(SignInThrottle)
        .where(SignInThrottle.subject == key)
        .values(failures=failures, retry_at=now + delay if delay else None, last_failed_at=now)
    )
    return None


async def failures(session: AsyncSession, key: str) -> int:
    """Failures in a row so far (the attempt being checked included)."""
    count = await session.scalar(
        select(SignInThrottle.failures).where(SignInThrottle.subject == key)
    )
    return count or 0


async def clear(session: AsyncSession, key: str) -> None:
    """The attempt succeeded: the subject starts afresh."""
    await session.execute(delete(SignInThrottle).where(SignInThrottle.subject == key))
