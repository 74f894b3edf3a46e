"""Transcription quality on speech that no one here made with the service's own voices.

Run `python -m bench.stt_quality [--quick]`. On every clip of `bench.speech_set` (real
recordings of three English speakers; eSpeak and Kokoro in six languages) two pipelines
transcribe twice, once told the language and once detecting it:

- `ours`: `WhisperEngine` as the service builds it (`registry.load_whisper(settings)`);
- `faster_whisper_defaults`: faster-whisper in-process on the same base model with its own
  defaults (`WhisperModel(dir).transcribe(audio)`: beam 5, the temperature fallback, text
  conditioning, no VAD, detection on the first 30 s; int8 weights as ours), told the
  language or not.

For each group (source and language) and each language: word error rate given the language,
word error rate and detection accuracy when detecting, and the difference ours minus
defaults (negative is better), so a change that loses accuracy shows up beside the figure it
replaced. `--quick` keeps the real recordings and the first sentence of each synthetic voice.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from faster_whisper import WhisperModel

from bench.speech_set import Clip, real_clips, synthetic_clips
from voice_service.engines.whisper import prepare_base_model
from voice_service.inference.engines import load_whisper
from voice_service.settings import Settings

DATA_DIR = Path(tempfile.gettempdir()) / "voice-service-bench"

# (audio, language or None to detect) -> (transcript, language)
Transcriber = Callable[[npt.NDArray[np.float32], str | None], tuple[str, str]]


@dataclass
class _Tally:
    """Word edits, reference words, correct detections, clips and seconds of one group."""

    given: list[int] = field(default_factory=lambda: [0, 0])
    detected: list[int] = field(default_factory=lambda: [0, 0])
    correct: int = 0
    clips: int = 0
    seconds: float = 0.0

    def add(self, clip: Clip, given: str, detected: tuple[str, str], seconds: float) -> None:
        for total, transcript in ((self.given, given), (self.detected, detected[0])):
            edits, words = clip.errors(transcript)
            total[0] += edits
            total[1] += words
        self.correct += detected[1] == clip.language
        self.clips += 1
        self.seconds += seconds

    def figures(self) -> dict[str, float]:
        return {
            "wer_given": round(self.given[0] / max(self.given[1], 1), 3),
            "wer_detected": round(self.detected[0] / max(self.detected[1], 1), 3),
            "detection": round(self.correct / max(self.clips, 1), 3),
            "seconds_per_clip": round(self.seconds / max(self.clips, 1), 2),
        }


def ours(data_dir: Path) -> Transcriber:
    engine = load_whisper(Settings(data_dir=data_dir))

    def transcribe(audio: npt.NDArray[np.float32], language: str | None) -> tuple[str, str]:
        result = engine.transcribe(audio, language)
        return result.text, result.language

    return transcribe


def faster_whisper_defaults(data_dir: Path) -> Transcriber:
    # int8 like ours: the comparison is of decoding, not of weight precision.
    model = WhisperModel(
        str(prepare_base_model(data_dir)), compute_type="int8", local_files_only=True
    )

    def transcribe(audio: npt.NDArray[np.float32], language: str | None) -> tuple[str, str]:
        segments, info = model.transcribe(audio, language=language)
        return " ".join(segment.text.strip() for segment in segments), str(info.language)

    return transcribe


def measure(clips: Iterable[Clip], transcriber: Transcriber) -> dict[str, dict[str, float]]:
    """Figures per "source/language" group, per language and "all"."""
    tallies: defaultdict[str, _Tally] = defaultdict(_Tally)
    for clip in clips:
        started = time.perf_counter()
        given = transcriber(clip.audio, clip.language)[0]
        detected = transcriber(clip.audio, None)
        seconds = time.perf_counter() - started
        for group in (f"{clip.source}/{clip.language}", clip.language, "all"):
            tallies[group].add(clip, given, detected, seconds)
    return {group: tally.figures() for group, tally in sorted(tallies.items())}


def run(quick: bool, clips: Sequence[Clip] | None = None) -> dict[str, Any]:
    """Measure `clips` (default: the whole set, or with `quick` its first sentences)."""
    if clips is None:
        clips = real_clips() + [
            clip for clip in synthetic_clips(DATA_DIR) if not quick or clip.name.endswith("/0")
        ]
    pipelines = {
        "ours": ours(DATA_DIR),
        "faster_whisper_defaults": faster_whisper_defaults(DATA_DIR),
    }
    figures = {name: measure(clips, transcriber) for name, transcriber in pipelines.items()}
    mine, reference = figures["ours"], figures["faster_whisper_defaults"]
    difference = {
        group: {key: round(value - reference[group][key], 3) for key, value in row.items()}
        for group, row in mine.items()
    }
    return {
        "clips": len(clips),
        "audio_seconds": round(sum(clip.audio.size for clip in clips) / 16_000, 1),
        **figures,
        "ours_minus_defaults": difference,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="real clips + one per voice")
    print(json.dumps(run(parser.parse_args().quick), indent=2))


if __name__ == "__main__":
    main()
