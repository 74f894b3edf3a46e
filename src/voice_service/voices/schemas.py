"""Voice as the API shows it (spec section 2)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, PlainSerializer, WithJsonSchema

from voice_service import models


def _iso_with_fraction(value: datetime) -> str:
    # ISO 8601 with fractional seconds even when they are zero (spec section 2).
    return value.isoformat(timespec="microseconds").replace("+00:00", "Z")


Timestamp = Annotated[
    datetime,
    PlainSerializer(_iso_with_fraction, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


class Voice(BaseModel):
    id: str = Field(examples=["voice_3f9c2b7d1e0a4c5b6a7d8e9f"])
    name: str
    language: str | None
    type: Literal["PROVIDER", "CLONED"]
    created_at: Timestamp

    @classmethod
    def of(cls, voice: models.Voice) -> Voice:
        return cls(
            id=voice.id,
            name=voice.name,
            language=voice.language,
            type="CLONED" if voice.type == "CLONED" else "PROVIDER",
            created_at=voice.created_at,
        )


class VoiceList(BaseModel):
    voices: list[Voice]


class OneVoice(BaseModel):
    voice: Voice
