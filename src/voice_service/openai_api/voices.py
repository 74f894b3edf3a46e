"""OpenAI's voice names, mapped onto this catalogue."""

from __future__ import annotations

from collections.abc import Sequence

from voice_service.core import models
from voice_service.core.ids import catalogue_voice_id
from voice_service.engines.catalog import CLONE_BASE_VOICE

# Each of OpenAI's names speaks with one voice: Piper's Joe, the first English voice
# GET /api/v1/voices lists among the local engines' (Piper ranks first: a sixth of Kokoro's
# CPU, and it says a text the same way every time); a voice id from that list (a clone's
# too) chooses any other.
OPENAI_NAMES = frozenset(
    ("alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse")
)


def openai_voice_id(catalogue: Sequence[models.Voice]) -> str:
    """The catalogue voice OpenAI's names speak with: Joe where this node has him; on a node
    without Piper (one that speaks through providers only), the first English voice of the
    catalogue, else its first voice."""
    joe = catalogue_voice_id(CLONE_BASE_VOICE)
    ids = [voice.id for voice in catalogue]
    if joe in ids or not ids:
        return joe
    english = [voice.id for voice in catalogue if (voice.language or "").startswith("en")]
    return (english or ids)[0]


def voice_id_for(voice: str, catalogue: Sequence[models.Voice]) -> str:
    """The catalogue or clone id `voice` names: one of OpenAI's names (the catalogue voice
    `openai_voice_id` picks), else an id as is."""
    return openai_voice_id(catalogue) if voice.strip().lower() in OPENAI_NAMES else voice
