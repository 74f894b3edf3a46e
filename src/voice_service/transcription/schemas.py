from __future__ import annotations

from pydantic import BaseModel, Field

SPEAKER = "Who said it, when diarize=true: speaker_0, speaker_1, … in order of first speech."


class TranscriptWord(BaseModel):
    word: str
    start: float
    end: float
    speaker: str | None = Field(None, description=SPEAKER)


class TranscriptSegment(BaseModel):
    start: float = Field(description="Seconds from the start of the recording.")
    end: float
    text: str
    speaker: str | None = Field(None, description=SPEAKER)
    words: list[TranscriptWord] | None = Field(
        None, description="Each word with its times, when `timestamps=word` was asked."
    )


class Transcript(BaseModel):
    """The native API's answer: the spec's Transcript resource (section 2), with `segments`
    where diarization or timestamps were asked for."""

    text: str
    language: str | None = Field(description="Detected or supplied ISO 639-1 code.")
    request_id: str
    segments: list[TranscriptSegment] | None = Field(
        None,
        description="Given when diarize=true or timestamps is asked for: the transcript in "
        "timed pieces, a new one wherever the speaker changes.",
    )
