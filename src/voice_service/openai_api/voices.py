"""OpenAI's voice names, mapped onto this catalogue."""

from __future__ import annotations

from voice_service.engines.registry import CLONE_BASE_VOICE
from voice_service.ids import catalogue_voice_id

# Each of OpenAI's names speaks with Piper's Joe, the first English voice GET /api/v1/voices
# lists (Piper ranks first: a sixth of Kokoro's CPU, and it says a text the same way every
# time); a voice id from that list (a clone's too) chooses any other.
OPENAI_VOICES: dict[str, str] = {
    name: CLONE_BASE_VOICE
    for name in (
        "alloy",
        "ash",
        "ballad",
        "coral",
        "echo",
        "fable",
        "nova",
        "onyx",
        "sage",
        "shimmer",
        "verse",
    )
}


def voice_id_for(voice: str) -> str:
    """The catalogue or clone id `voice` names: one of OpenAI's names, else an id as is."""
    key = OPENAI_VOICES.get(voice.strip().lower())
    return catalogue_voice_id(key) if key is not None else voice
