"""Finding one voice for a caller: the shared catalogue and the organization's own clones."""

from __future__ import annotations

from voice_service.core.errors import VoiceNotFound
from voice_service.core.models import Voice
from voice_service.runtime import Runtime
from voice_service.tenancy.principal import Principal
from voice_service.voices.repository import CLONED, get_visible


async def find_voice(runtime: Runtime, principal: Principal, voice_id: str) -> Voice:
    """The voice `voice_id` if the caller's organization may use it; read from the
    database, not from a listing cache, so a clone deleted on any node is gone at once."""
    voice = await visible_voice(runtime, principal.org_id, voice_id)
    if voice is None:
        # One answer for an unknown id and another organization's clone (spec section 5).
        raise VoiceNotFound(voice_id)
    return voice


async def visible_voice(runtime: Runtime, org_id: str, voice_id: str) -> Voice | None:
    """The catalogue voice or live clone of the organization's `voice_id`; None if neither."""
    async with runtime.sessions() as session:
        return await get_visible(session, org_id, voice_id)


async def find_clone(runtime: Runtime, org_id: str, voice_id: str) -> Voice | None:
    """The organization's live clone `voice_id`; None for a catalogue voice or no voice."""
    voice = await visible_voice(runtime, org_id, voice_id)
    return voice if voice is not None and voice.type == CLONED else None
