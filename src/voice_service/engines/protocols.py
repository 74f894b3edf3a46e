"""Capabilities every engine implements.

Engines are plain Python: they never import FastAPI or the ORM. They take and return the
dataclasses below and raise `EngineError` when the model itself fails, which the API turns
into 502 PROVIDER_ERROR. Calls are blocking and CPU-bound; callers run them in the worker pool.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt


class EngineError(Exception):
    """The engine failed to produce a result for valid input."""


class UnusableSample(ValueError):
    """A clone's sample holds no speech the cloner can use; the message says why."""


class UnknownVoice(LookupError):
    """No engine of this node speaks with the voice key (a voice another node offers, or
    one whose engine the operator turned off)."""

    def __init__(self, voice_key: str) -> None:
        super().__init__(f"no engine on this node speaks {voice_key!r}")
        self.voice_key = voice_key


# A word's start and end, in seconds from the start of the audio it was spoken in.
WordTime = tuple[float, float]

# Text given to `TextToSpeech.synthesize` may hold phonemes (espeak-ng's IPA) between these
# two private-use characters: a pronunciation rule's (`pronunciation`). Customers' text
# never holds them (`chunking.speakable`).
PHONEMES_OPEN = "\ue000"
PHONEMES_CLOSE = "\ue001"


def phoneme_pieces(text: str) -> list[tuple[str, bool]]:
    """`text` in pieces, each with whether it is phonemes (else text to read)."""
    pieces: list[tuple[str, bool]] = []
    rest = text
    while PHONEMES_OPEN in rest:
        before, _, after = rest.partition(PHONEMES_OPEN)
        phonemes, _, rest = after.partition(PHONEMES_CLOSE)
        pieces += [(before, False), (phonemes, True)]
    pieces.append((rest, False))
    return [(piece, is_phonemes) for piece, is_phonemes in pieces if piece.strip()]


@dataclass(frozen=True, slots=True)
class Pcm:
    """Mono 16-bit PCM audio."""

    samples: npt.NDArray[np.int16]
    sample_rate: int
    # When each word of the text was spoken, as the engine split the text into words;
    # empty when the engine cannot tell (`engines/alignment.py` then spreads the text out).
    word_times: tuple[WordTime, ...] = ()

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
    # The speeds its own timing says text at within about 10 % of 1/speed as long (its
    # model's durations, its rate); the rest of a speed past them is time-stretched
    # (`inference.engines`).
    speeds: tuple[float, float]

    def voices(self) -> Sequence[EngineVoice]:
        """The voices this engine offers, loaded once at start."""
        ...

    def synthesize(self, voice_key: str, text: str, speed: float = 1.0) -> Pcm:
        """Speak `text` with the voice `voice_key` (one of `voices()`), `speed` times as fast
        as the voice's own pace (within `speeds`)."""
        ...

    def clone_bases(self) -> Sequence[str]:
        """The keys of its voices that clones may be spoken through, converted toward
        their samples (`inference.engines.load_cloner`); none for most engines."""
        ...

    def clone_base_languages(self, key: str) -> Mapping[str, str]:
        """The languages the clone base `key` speaks (ISO 639-1 codes), each with the key
        of the same voice speaking it."""
        ...


@dataclass(frozen=True, slots=True)
class Clone:
    """What a sample made: the profile the voice is spoken from (stored with it, JSON-
    serializable) and how much the voice resembles the sample."""

    profile: dict[str, Any]
    # 0-1, by the node's own speaker encoder: the clone's speech against the sample, where
    # 0 is a stranger and 1 a second recording of the person (`speaker_embedding.resemblance`).
    resemblance: float


class VoiceCloner(Protocol):
    """Clones: a profile measured once on a sample, then speech in that voice."""

    @property
    def base_voice(self) -> str:
        """The key of the default base voice (stored with each clone); a cloner that chooses
        among several bases records its choice in the profile."""
        ...

    @property
    def sample_rate(self) -> int:
        """The rate samples are analysed at: decode them at this rate."""
        ...

    def clone(self, sample: Pcm) -> Clone:
        """The voice `sample` makes. Raises `UnusableSample` when the sample holds no
        usable speech."""
        ...

    @property
    def speeds(self) -> tuple[float, float]:
        """The speeds `speaker` reaches by itself (as `TextToSpeech.speeds`)."""
        ...

    def languages(self, profile: Mapping[str, Any]) -> tuple[str, ...]:
        """The languages (ISO 639-1 codes) the voice `profile` describes speaks: its base
        voice's, the base's own first."""
        ...

    def speaker(
        self, profile: Mapping[str, Any], speed: float = 1.0, language: str | None = None
    ) -> Callable[[str], Pcm]:
        """Says a chunk of text in the voice `profile` describes, `speed` times as fast as
        its base voice's pace, in `language` (one of `languages`; None: the base's own).
        Derive it once per request; the callable is used for every chunk."""
        ...


@dataclass(frozen=True, slots=True)
class Transcription:
    text: str
    language: str


@dataclass(frozen=True, slots=True)
class Word:
    word: str
    start: float  # seconds from the start of the audio
    end: float
    speaker: str | None = None  # who said it, when the transcript was diarized


@dataclass(frozen=True, slots=True)
class Segment:
    text: str
    start: float  # seconds; 0 and the window's end when timestamps were not asked for
    end: float
    words: tuple[Word, ...] = ()
    # The decoder's own measures, which OpenAI's verbose_json reports per segment.
    tokens: tuple[int, ...] = ()
    avg_logprob: float = 0.0
    compression_ratio: float = 0.0
    no_speech_prob: float = 0.0
    speaker: str | None = None  # who said it (speaker_0, …), when the transcript was diarized


@dataclass(frozen=True, slots=True)
class TranscribeOptions:
    """How to decode. The defaults are what the native API uses."""

    language: str | None = None  # None: detect it
    task: Literal["transcribe", "translate"] = "transcribe"  # translate: into English
    timestamps: bool = False  # segment start and end times
    word_timestamps: bool = False
    prompt: str | None = None  # text the audio continues (names, spelling)
    # Text the transcript must begin with, decoded on from there (the first 30 s window
    # only; this node's Whisper only): what live partial transcripts already said.
    prefix: str | None = None
    # 0 decodes greedily and deterministically; above 0 Whisper samples (one temperature,
    # never the random fallback ladder).
    temperature: float = 0.0
    # Encode windows of this many seconds instead of Whisper's 30 (this node's Whisper
    # only; at least the audio's length): a live turn of a few seconds is encoded, the bulk
    # of its cost, in a fraction of the time. None: 30.
    window_seconds: int | None = None
    # Decode with Whisper's timestamp tokens first, as batch transcripts are (this node's
    # Whisper only, on audio up to 30 s). False: one decode without them, much faster on a
    # live partial's few seconds, which often loop on timestamps when cut mid-word.
    timestamp_tokens: bool = True
    # Ask the engine to tell the speakers apart (a provider that does: its segments then
    # name their speakers), with their number where known. This node's Whisper does not.
    diarize: bool = False
    num_speakers: int | None = None
    # Which of the node's models decodes (None: its default): the resolver reads it, the
    # engines do not.
    model: str | None = None


@dataclass(frozen=True, slots=True)
class TranscriptStream:
    """A transcription under way: the language is known, segments come window by window."""

    language: str
    segments: Iterator[Segment]


class SpeechToText(Protocol):
    def languages(self) -> frozenset[str]:
        """ISO 639-1 codes the model accepts as a language hint."""
        ...

    def stream(
        self, audio: npt.NDArray[np.float32], options: TranscribeOptions
    ) -> TranscriptStream:
        """Transcribe (or translate) mono 16 kHz float32 audio.

        The work happens while `segments` is consumed, so a caller can stop between steps."""
        ...
