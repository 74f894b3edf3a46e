from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from voice_service.engines.protocols import Segment


def _absent(value: object) -> bool:
    return value is None


SPEAKER = "Who said it, when diarize=true: speaker_0, speaker_1, … in order of first speech."


class TranscriptWord(BaseModel):
    word: str
    start: float
    end: float
    speaker: str | None = Field(None, description=SPEAKER, exclude_if=_absent)


class TranscriptSegment(BaseModel):
    start: float = Field(description="Seconds from the start of the recording.")
    end: float
    text: str
    speaker: str | None = Field(None, description=SPEAKER, exclude_if=_absent)
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


def segment_fields(segment: Segment, words: bool) -> dict[str, Any]:
    """A segment as every native surface shows it (a `TranscriptSegment`'s fields): times to
    the millisecond, `speaker` only where diarized, `words` only where asked for."""
    shown: dict[str, Any] = {
        "start": round(segment.start, 3),
        "end": round(segment.end, 3),
        "text": segment.text.strip(),
    }
    if segment.speaker is not None:
        shown["speaker"] = segment.speaker
    if words:
        shown["words"] = [
            {
                "word": word.word,
                "start": round(word.start, 3),
                "end": round(word.end, 3),
                **({"speaker": word.speaker} if word.speaker is not None else {}),
            }
            for word in segment.words
        ]
    return shown


class TranscriptionModel(BaseModel):
    model_id: str = Field(
        description="What `model_id` (`model` on /v1) names.", examples=["large-v3-turbo"]
    )
    engine: str = Field(examples=["whisper"])
    languages: list[str] = Field(description="ISO 639-1 codes it takes as `language`.")
    default: bool = Field(description="Used when a request names no model.")
    loaded: bool = Field(
        description="In memory on the node that answered: the first request on a model "
        "that is not waits for it to load."
    )


class TranscriptionModelList(BaseModel):
    models: list[TranscriptionModel]
