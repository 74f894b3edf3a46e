"""Voice rows. Every query of an organization's voices goes through `visible_to`."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core.ids import catalogue_voice_id
from voice_service.core.models import Voice, utcnow
from voice_service.core.vocabulary import Capability
from voice_service.engines.catalog import engine_names, engine_of
from voice_service.engines.protocols import EngineVoice

PROVIDER, CLONED = "PROVIDER", "CLONED"


def live_clone() -> ColumnElement[bool]:
    """A clone that is not deleted: the one filter of every query of live clones."""
    return (Voice.type == CLONED) & Voice.deleted_at.is_(None)


def visible_to(org_id: str) -> ColumnElement[bool]:
    """Live voices an organization may see: the shared catalogue and its own clones."""
    return (Voice.deleted_at.is_(None)) & or_(Voice.type == PROVIDER, Voice.org_id == org_id)


async def list_catalogue(session: AsyncSession) -> Sequence[Voice]:
    """The catalogue, best engine first: the providers' voices (an operator adds them for
    their quality), Piper's neural English, then Kokoro's neural voices, then eSpeak's basic
    ones; by language within an engine, then by name. So the first voice of a language is
    its best, and a client that takes the first voice it finds for a language gets that
    one."""
    result = await session.scalars(
        select(Voice).where(Voice.type == PROVIDER, Voice.deleted_at.is_(None))
    )
    # Sorted here, not in SQL, because the databases collate "eSpeak" against "Piper" apart.
    return sorted(
        result.all(),
        key=lambda voice: catalogue_order(voice.engine_voice, voice.language, voice.name),
    )


def catalogue_order(
    engine_voice: str, language: str | None, name: str
) -> tuple[int, str, str, str]:
    """Where a voice stands in `GET /voices`: by engine rank, then language, then name (and
    id, which derives from `engine_voice`, for voices of one name)."""
    engine = engine_of(engine_voice)
    local = engine_names(Capability.TEXT_TO_SPEECH)
    rank = local.index(engine) + 1 if engine in local else 0  # 0: a provider's
    return rank, (language or "").lower(), name, catalogue_voice_id(engine_voice)


async def list_clones(session: AsyncSession, org_id: str) -> Sequence[Voice]:
    result = await session.scalars(
        select(Voice)
        .where(Voice.org_id == org_id, live_clone())
        .order_by(Voice.created_at, Voice.id)
    )
    return result.all()


async def get_visible(session: AsyncSession, org_id: str, voice_id: str) -> Voice | None:
    return await session.scalar(select(Voice).where(Voice.id == voice_id, visible_to(org_id)))


async def sync_catalogue(session: AsyncSession, engine_voices: Sequence[EngineVoice]) -> None:
    """Make the catalogue rows match the engines this node loaded.

    Ids derive from engine keys, so they survive restarts; a voice that is no longer
    offered is hidden, and comes back with its id if it returns."""
    wanted = {catalogue_voice_id(v.key): v for v in engine_voices}
    existing = {v.id: v for v in await session.scalars(select(Voice).where(Voice.type == PROVIDER))}
    for voice_id, engine_voice in wanted.items():
        row = existing.get(voice_id)
        if row is None:
            session.add(
                Voice(
                    id=voice_id,
                    type=PROVIDER,
                    name=engine_voice.name,
                    language=engine_voice.language,
                    engine_voice=engine_voice.key,
                )
            )
        else:
            row.name, row.language, row.deleted_at = engine_voice.name, engine_voice.language, None
    gone = [voice_id for voice_id in existing if voice_id not in wanted]
    if gone:
        await session.execute(
            update(Voice)
            .where(Voice.id.in_(gone), Voice.deleted_at.is_(None))
            .values(deleted_at=utcnow())
        )
