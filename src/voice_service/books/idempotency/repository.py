"""The `idempotency_keys` rows: claimed by a request, renewed while it runs, completed with
its answer or released for a retry to run again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import ColumnElement, delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.models import IdempotencyEntry

KEPT_FOR = timedelta(hours=24)  # a key names its request this long
LEASE = timedelta(seconds=30)  # renewed while the request runs; a dead node's lapses


@dataclass(frozen=True, slots=True)
class Claimed:
    """This request runs the key's request; `billed` if an earlier run of it was billed
    before its node died (its answer was lost: this run is not billed again)."""

    billed: bool
    stale_answer: str | None = None  # the request id of an expired answer in the store


@dataclass(frozen=True, slots=True)
class Done:
    entry: IdempotencyEntry


class Running:
    """Another request runs it now."""


class Mismatch:
    """The key named another request."""


Claim = Claimed | Done | Running | Mismatch


async def claim(
    session: AsyncSession, org_id: str, key: str, fingerprint: str, request_id: str, now: datetime
) -> Claim:
    """Take the key for `request_id`, or say why not. A concurrent first use of the same
    key raises IntegrityError on insert: the caller asks again and finds it `Running`."""
    entry = await session.get(IdempotencyEntry, (org_id, key), with_for_update=True)
    if entry is None:
        session.add(
            IdempotencyEntry(
                org_id=org_id,
                key=key,
                fingerprint=fingerprint,
                request_id=request_id,
                lease_until=now + LEASE,
                created_at=now,
                expires_at=now + KEPT_FOR,
            )
        )
        await session.flush()
        return Claimed(billed=False)
    if entry.expires_at <= now:  # a day old: the key is free again
        stale_answer = entry.request_id if entry.body_in_store else None
        entry.fingerprint, entry.request_id, entry.done, entry.billed = (
            fingerprint,
            request_id,
            False,
            False,
        )
        entry.status = entry.error_code = entry.content_type = None
        entry.body, entry.body_in_store = None, False
        entry.lease_until, entry.created_at, entry.expires_at = now + LEASE, now, now + KEPT_FOR
        return Claimed(billed=False, stale_answer=stale_answer)
    if entry.fingerprint != fingerprint:
        return Mismatch()
    if entry.done:
        return Done(entry)
    if entry.lease_until > now:
        return Running()
    # Its request's node stopped renewing the lease: this request runs it again.
    entry.request_id, entry.lease_until = request_id, now + LEASE
    return Claimed(billed=entry.billed)


async def renew(
    session: AsyncSession, org_id: str, key: str, request_id: str, now: datetime
) -> None:
    await session.execute(
        update(IdempotencyEntry)
        .where(*_held_by(org_id, key, request_id), IdempotencyEntry.done.is_(False))
        .values(lease_until=now + LEASE)
    )


async def mark_billed(session: AsyncSession, org_id: str, key: str, request_id: str) -> None:
    """In the success's own transaction: its usage row and this mark commit together."""
    await session.execute(
        update(IdempotencyEntry).where(*_held_by(org_id, key, request_id)).values(billed=True)
    )


async def complete(
    session: AsyncSession,
    org_id: str,
    key: str,
    request_id: str,
    *,
    status: int,
    error_code: str | None,
    content_type: str | None,
    body: bytes | None,
    body_in_store: bool,
) -> None:
    await session.execute(
        update(IdempotencyEntry)
        .where(*_held_by(org_id, key, request_id))
        .values(
            done=True,
            status=status,
            error_code=error_code,
            content_type=content_type,
            body=body,
            body_in_store=body_in_store,
        )
    )


async def release(session: AsyncSession, org_id: str, key: str, request_id: str) -> None:
    """Forget the key (an error is not kept: a retry runs again), unless the request was
    billed (and its answer then could not be kept): the entry stays, free for a retry to
    run it without billing it again."""
    await session.execute(
        delete(IdempotencyEntry).where(
            *_held_by(org_id, key, request_id), IdempotencyEntry.billed.is_(False)
        )
    )
    await session.execute(
        update(IdempotencyEntry).where(*_held_by(org_id, key, request_id)).values(lease_until=_PAST)
    )


async def expired(session: AsyncSession, now: datetime, limit: int) -> list[IdempotencyEntry]:
    rows = await session.scalars(
        select(IdempotencyEntry).where(IdempotencyEntry.expires_at <= now).limit(limit)
    )
    return list(rows)


async def remove(session: AsyncSession, org_id: str, key: str, expires_at: datetime) -> bool:
    """Delete an expired entry unless a request has claimed the key again since."""
    result = await session.execute(
        delete(IdempotencyEntry).where(
            IdempotencyEntry.org_id == org_id,
            IdempotencyEntry.key == key,
            IdempotencyEntry.expires_at == expires_at,
        )
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


_PAST = datetime(2000, 1, 1, tzinfo=UTC)


def _held_by(org_id: str, key: str, request_id: str) -> tuple[ColumnElement[bool], ...]:
    return (
        IdempotencyEntry.org_id == org_id,
        IdempotencyEntry.key == key,
        IdempotencyEntry.request_id == request_id,
    )
