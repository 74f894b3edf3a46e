from __future__ import annotations

from pydantic import BaseModel, Field


class Transcript(BaseModel):
    text: str
    language: str | None = Field(description="Detected or supplied ISO 639-1 code.")
    request_id: str
