"""How a text is said beyond its words and voice: its speed, the neighbouring text it goes on
from and into, the pronunciation rules for its words, and the language a clone says it in."""

from __future__ import annotations

from dataclasses import dataclass

from voice_service.engines.continuity import NO_CONTEXT, Context
from voice_service.engines.pronunciation import NO_LEXICON, Lexicon

# How much faster than its own pace a voice speaks: OpenAI's `speed` range, which also holds
# ElevenLabs' (0.7 to 1.2).
SPEEDS = (0.25, 4.0)


@dataclass(frozen=True, slots=True)
class Manner:
    speed: float = 1.0  # times the voice's own pace
    context: Context = NO_CONTEXT
    lexicon: Lexicon = NO_LEXICON
    # The lexicon is the organization's defaults, not dictionaries the request named: a
    # voice that cannot take dictionaries speaks without them rather than refusing.
    lexicon_by_default: bool = False
    # A clone speaks its base voice's languages (ISO 639-1); None: the base's own. A
    # catalogue voice speaks its own language only.
    language: str | None = None


PLAIN = Manner()
