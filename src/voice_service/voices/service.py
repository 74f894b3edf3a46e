"""Finding one voice for a caller: the shared catalogue and the organization's own clones."""

from __future__ import annotations

from voice_service.core.errors import VoiceNotFound
from voice_service.core.models import Voice
from voice_service.runtime import Runtime
from voice_service.tenancy.principal import Principal
from voice_service.voices.repository import get_visible


async def find_voice(runtime: Runtime, principal: Principal, voice_id: str) -> Voice:
    """The voice `voice_id` if the caller's organization may use it; read from the
    database, not from a listing cache, so a clone deleted on any node is gone at once."""
    async with runtime.sessions() as session:
        voice = await get_visible(session, principal.org_id, voice_id)
    if voice is None:
        # One answer for an unknown id and another organization's clone (spec section 5).
        raise VoiceNotFound(voice_id)
    return voice
