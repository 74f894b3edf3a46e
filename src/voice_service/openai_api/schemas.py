"""Request and response bodies of the OpenAI-compatible API, as OpenAI documents them."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from voice_service.audio.encode import OutputFormat
from voice_service.pronunciation.schemas import Locators
from voice_service.speech.schemas import EXAMPLE_TEXT, LanguageCode, SpeechText, Speed
from voice_service.voices.schemas import EXAMPLE_VOICE_ID

TTS_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")


class VoiceRef(BaseModel):
    id: str = Field(min_length=1, max_length=100, examples=[EXAMPLE_VOICE_ID])


class SpeechBody(BaseModel):
    model_config = ConfigDict(
        extra="ignore",  # later OpenAI fields must not break clients
        json_schema_extra={
            "examples": [
                {"model": "tts-1", "input": EXAMPLE_TEXT, "voice": "alloy"},
                {
                    "model": "tts-1",
                    "input": EXAMPLE_TEXT,
                    "voice": EXAMPLE_VOICE_ID,
                    "response_format": "wav",
                },
            ]
        },
    )

    model: str = Field(
        "tts-1",
        min_length=1,
        max_length=100,
        description=f"Any name; {', '.join(TTS_MODELS)} are listed. The voice chooses the engine.",
    )
    input: SpeechText = Field(examples=[EXAMPLE_TEXT])
    voice: str | VoiceRef = Field(
        description="One of OpenAI's voice names, a voice id from GET /api/v1/voices, "
        'or {"id": "voice_..."}.',
        examples=["alloy", EXAMPLE_VOICE_ID],
    )
    response_format: OutputFormat = OutputFormat.MP3
    speed: Speed = 1.0
    instructions: str | None = Field(
        None,
        max_length=4096,
        description="Accepted for compatibility; these voices do not take instructions.",
    )
    stream_format: Literal["audio", "sse"] = "audio"
    # Ours (ElevenLabs' names), not OpenAI's: the SDK sends them in `extra_body`.
    pronunciation_dictionary_locators: Locators = None
    language_code: LanguageCode = None

    @property
    def voice_name(self) -> str:
        return self.voice.id if isinstance(self.voice, VoiceRef) else self.voice


class TranscriptFormat(StrEnum):
    JSON = "json"
    TEXT = "text"
    SRT = "srt"
    VERBOSE_JSON = "verbose_json"
    VTT = "vtt"
    DIARIZED_JSON = "diarized_json"  # as gpt-4o-transcribe-diarize answers: speakers A, B, …


class Model(BaseModel):
    id: str = Field(examples=["whisper-1"])
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "voice-service"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Model]
