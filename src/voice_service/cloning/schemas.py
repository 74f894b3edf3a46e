from __future__ import annotations

from pydantic import BaseModel

from voice_service.voices.schemas import Voice

MAX_NAME_LENGTH = 64
MAX_DESCRIPTION_LENGTH = 500
CONSENT_TEXT = "true"


class ClonedVoice(BaseModel):
    voice: Voice


class DeletedVoice(BaseModel):
    deleted: bool
    id: str
