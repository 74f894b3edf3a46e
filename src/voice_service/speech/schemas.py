from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

MAX_TEXT_LENGTH = 5000


class SpeechRequest(BaseModel):
    text: str = Field(
        min_length=1,
        max_length=MAX_TEXT_LENGTH,
        description="1 to 5000 characters; billed one unit per character.",
        examples=["Hello from Voice Service."],
    )
    voice_id: str = Field(min_length=1, max_length=100, description="An id from GET /voices.")

    @field_validator("text")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("text must contain something other than whitespace")
        return text
