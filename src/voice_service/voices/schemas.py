"""Voice as the API shows it (spec section 2)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, PlainSerializer, WithJsonSchema

from voice_service.core import models
from voice_service.core.ids import catalogue_voice_id
from voice_service.engines.catalog import CLONE_BASE_VOICE

# Piper's Joe, English. A catalogue id derives from the engine's voice key, so Joe has this
# one on every install with Piper (the default): the reference's examples speak with him,
# and its "Try it out" answers as it is filled in.
EXAMPLE_VOICE_ID = catalogue_voice_id(CLONE_BASE_VOICE)


def _iso_with_fraction(value: datetime) -> str:
    # ISO 8601 with fractional seconds even when they are zero (spec section 2).
    return value.isoformat(timespec="microseconds").replace("+00:00", "Z")


Timestamp = Annotated[
    datetime,
    PlainSerializer(_iso_with_fraction, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


# Where a resemblance (0: a stranger, 1: a second recording of the person) turns from one
# plain word to the next, as the console and the CLI say it.
FAIR_RESEMBLANCE = 0.4
CLOSE_RESEMBLANCE = 0.7


def resemblance_word(resemblance: float | None) -> str | None:
    """ "low", "fair" or "close"; None where nothing was measured."""
    if resemblance is None:
        return None
    if resemblance >= CLOSE_RESEMBLANCE:
        return "close"
    return "fair" if resemblance >= FAIR_RESEMBLANCE else "low"


class Voice(BaseModel):
    id: str = Field(examples=[EXAMPLE_VOICE_ID])
    name: str
    language: str | None
    type: Literal["PROVIDER", "CLONED"]
    created_at: Timestamp
    # Beyond the spec's Voice (issue 51): a clone's description, as given when it was made.
    description: str | None = Field(
        None, description="A clone's description, as given when it was made; null otherwise."
    )
    # Beyond the spec's Voice (issue 56).
    resemblance: float | None = Field(
        None,
        ge=0,
        le=1,
        examples=[0.42],
        description=(
            "How much a clone sounds like its sample, by this node's own speaker encoder: "
            "0 is where a stranger sits, 1 where a second recording of the person sits. "
            "Null for catalogue voices, clones made at a provider, and clones made before "
            "it was measured."
        ),
    )
    languages: list[str] | None = Field(
        None,
        examples=[["en", "es", "fr", "it", "pt", "ja"]],
        description=(
            "The languages a clone made on this node speaks (its base voice's, as "
            "`language_code` values, its own first). Null for catalogue voices, whose "
            "`language` says theirs, and for clones made at a provider."
        ),
    )

    @classmethod
    def of(cls, voice: models.Voice, languages: Sequence[str] | None = None) -> Voice:
        """The voice as the API shows it; a clone with the `languages` it speaks here."""
        return cls(
            id=voice.id,
            name=voice.name,
            language=voice.language,
            type="CLONED" if voice.type == "CLONED" else "PROVIDER",
            created_at=voice.created_at,
            description=voice.description if voice.type == "CLONED" else None,
            resemblance=voice.resemblance if voice.type == "CLONED" else None,
            languages=list(languages) if languages is not None else None,
        )


class VoiceList(BaseModel):
    voices: list[Voice]


class OneVoice(BaseModel):
    voice: Voice
