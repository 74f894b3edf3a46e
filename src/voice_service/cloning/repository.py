"""SQL for cloned voices: the org-serialized limit check, insertion and deletion, and
their samples in the database."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import delete, func, null, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.models import Organization, Voice, VoiceSample, utcnow
from voice_service.tenancy.cache import record_change
from voice_service.voices.repository import live_clone


async def lock_org_clone_limit(session: AsyncSession, org_id: str) -> int | None:
    """Serialize clone creation per organization for the rest of the transaction.

    A no-op UPDATE takes the org row's lock on PostgreSQL and SQLite's write lock, so a
    concurrent clone waits here and then counts the committed result of this one; a plain
    SELECT would let both count the same number and both insert. Returns the org's limit.
    """
    await session.execute(
        update(Organization)
        .where(Organization.id == org_id)
        .values(clone_limit=Organization.clone_limit)
    )
    return await org_clone_limit(session, org_id)


async def org_clone_limit(session: AsyncSession, org_id: str) -> int | None:
    limit: int | None = await session.scalar(
        select(Organization.clone_limit).where(Organization.id == org_id)
    )
    return limit


async def count_live_clones(session: AsyncSession, org_id: str) -> int:
    count = await session.scalar(
        select(func.count()).select_from(Voice).where(Voice.org_id == org_id, live_clone())
    )
    return count or 0


async def delete_clone(session: AsyncSession, org_id: str, voice_id: str) -> bool:
    """Mark the org's live clone deleted and drop its profile and any sample row kept in
    the database; False if there is none.

    One conditional UPDATE, so of two concurrent deletes exactly one matches the row. The
    sample row goes whichever store is configured now, so a switch to S3 leaves none."""
    result = await session.execute(
        update(Voice)
        .where(
            Voice.id == voice_id,
            Voice.org_id == org_id,
            live_clone(),
        )
        .values(deleted_at=utcnow(), profile=null())
    )
    if not result.rowcount:  # type: ignore[attr-defined]
        return False
    await record_change(session)
    await session.execute(
        delete(VoiceSample).where(VoiceSample.voice_id == voice_id, VoiceSample.org_id == org_id)
    )
    return True


async def add_clone(session: AsyncSession, voice: Voice) -> None:
    session.add(voice)
    await record_change(session)  # the organization's listing gains it


async def live_clones(session: AsyncSession, voice_ids: Collection[str]) -> set[tuple[str, str]]:
    """(org id, voice id) of those of `voice_ids` that are live clones."""
    rows = await session.execute(
        select(Voice.org_id, Voice.id).where(Voice.id.in_(voice_ids), live_clone())
    )
    return {(org_id, voice_id) for org_id, voice_id in rows if org_id is not None}
