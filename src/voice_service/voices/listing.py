"""Listing voices: the organization's clones, the catalogue beside them, and the GET /voices
bodies, whose shared catalogue is serialized once and each org's clones per request.

The catalogue changes only when a node starts (it is what the node's engines loaded), so
serializing its rows on every listing would be most of the endpoint's work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.core import models
from voice_service.inference.engines import Engines
from voice_service.runtime import Runtime
from voice_service.voices.repository import list_catalogue, list_clones
from voice_service.voices.schemas import Voice


async def organization_clones(session: AsyncSession, org_id: str) -> Sequence[models.Voice]:
    """The organization's live clones, oldest first."""
    return await list_clones(session, org_id)


async def clones_of(runtime: Runtime, org_id: str) -> Sequence[models.Voice]:
    """The organization's live clones, oldest first, read now (not from a listing cache)."""
    async with runtime.sessions() as session:
        return await organization_clones(session, org_id)


@dataclass(frozen=True, slots=True)
class OrganizationVoices:
    catalogue: Sequence[models.Voice]  # as the database has it, best engine first
    clones: Sequence[models.Voice]


async def voices_of(runtime: Runtime, org_id: str) -> OrganizationVoices:
    """The catalogue and the organization's live clones, read together."""
    async with runtime.sessions() as session:
        catalogue = await list_catalogue(session)
        return OrganizationVoices(catalogue, await organization_clones(session, org_id))


def clone_languages(engines: Engines | None, voice: models.Voice) -> list[str] | None:
    """The languages a clone made here speaks on this node (its base voice's, the base's own
    first); None for catalogue voices and clones made at a provider, which have no profile."""
    if voice.profile is None:
        return None
    return list(engines.clone_languages(voice.profile)) if engines is not None else []


def shown(engines: Engines | None, voice: models.Voice) -> Voice:
    """The voice as the API shows it, a clone with the languages it speaks here."""
    return Voice.of(voice, clone_languages(engines, voice))


class VoiceListing:
    """The node's engines are fixed while it runs, so what its clones speak is too."""

    def __init__(self, catalogue: Sequence[models.Voice], engines: Engines | None) -> None:
        self.catalogue = tuple(catalogue)
        self._engines = engines
        self._catalogue = [self._json(voice) for voice in catalogue]

    def render(self, clones: Sequence[models.Voice]) -> bytes:
        """The JSON of a `VoiceList`: the catalogue, then the organization's clones."""
        items = [*self._catalogue, *(self._json(voice) for voice in clones)]
        return b'{"voices":[' + b",".join(items) + b"]}"

    def _json(self, voice: models.Voice) -> bytes:
        return shown(self._engines, voice).model_dump_json().encode()
