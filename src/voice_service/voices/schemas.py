"""Voice as the API shows it (spec section 2)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, field_serializer

from voice_service.models import Voice


class VoiceOut(BaseModel):
    id: str = Field(examples=["voice_3f9c2b7d1e0a4c5b6a7d8e9f"])
    name: str
    language: str | None
    type: Literal["PROVIDER", "CLONED"]
    created_at: datetime

    @field_serializer("created_at")
    def _always_fractional(self, value: datetime) -> str:
        # ISO 8601 with fractional seconds even when they are zero (spec section 2).
        return value.isoformat(timespec="microseconds").replace("+00:00", "Z")

    @classmethod
    def of(cls, voice: Voice) -> VoiceOut:
        return cls(
            id=voice.id,
            name=voice.name,
            language=voice.language,
            type="CLONED" if voice.type == "CLONED" else "PROVIDER",
            created_at=voice.created_at,
        )


class VoiceList(BaseModel):
    voices: list[VoiceOut]
