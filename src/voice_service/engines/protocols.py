"""Capabilities every engine implements.

Engines are plain Python: they never import FastAPI or the ORM. They take and return the
dataclasses below and raise `EngineError` when the model itself fails, which the API turns
into 502 PROVIDER_ERROR. Calls are blocking and CPU-bound; callers run them in the worker pool.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt


class EngineError(Exception):
    """The engine failed to produce a result for valid input."""


@dataclass(frozen=True, slots=True)
class Pcm:
    """Mono 16-bit PCM audio."""

    samples: npt.NDArray[np.int16]
    sample_rate: int

    @property
    def duration_seconds(self) -> float:
        return len(self.samples) / self.sample_rate


@dataclass(frozen=True, slots=True)
class EngineVoice:
    """A voice an engine can speak with.

    `key` is stable across restarts and unique across engines ("piper:en_US-joe-medium",
    "espeak:de"); catalogue voice ids are derived from it.
    """

    key: str
    name: str
    language: str | None


class TextToSpeech(Protocol):
    def voices(self) -> Sequence[EngineVoice]:
        """The voices this engine offers, loaded once at start."""
        ...

    def synthesize(self, voice_key: str, text: str) -> Pcm:
        """Speak `text` with the voice `voice_key` (one of `voices()`)."""
        ...


@dataclass(frozen=True, slots=True)
class Transcription:
    text: str
    language: str


@dataclass(frozen=True, slots=True)
class TranscriptStream:
    """A transcription under way: the language is known, the text comes window by window."""

    language: str
    segments: Iterator[str]


class SpeechToText(Protocol):
    def languages(self) -> frozenset[str]:
        """ISO 639-1 codes the model accepts as a language hint."""
        ...

    def stream(self, audio: npt.NDArray[np.float32], language: str | None) -> TranscriptStream:
        """Transcribe mono 16 kHz float32 audio; detect the language when `language` is None.

        The work happens while `segments` is consumed, so a caller can stop between steps."""
        ...
