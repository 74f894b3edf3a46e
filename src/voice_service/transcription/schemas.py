from __future__ import annotations

from pydantic import BaseModel, Field


class Transcript(BaseModel):
    """The native API's answer: the spec's Transcript resource (section 2)."""

    text: str
    language: str | None = Field(description="Detected or supplied ISO 639-1 code.")
    request_id: str
