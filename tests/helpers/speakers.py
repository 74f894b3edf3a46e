"""Conversations of real people (pocketsphinx-testdata's three readers) with the truth of who
spoke when, and the check that a diarized answer's labels stand for them."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
from bench.diarization_set import voice_clips
from bench.speech_set import Clip
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from voice_service.audio.encode import wav_of
from voice_service.engines.catalog import DIARIZER
from voice_service.engines.speaker_embedding import SAMPLE_RATE

# The three people of pocketsphinx-testdata.
READER, CALLER, COMMANDS = "librivox reader", "card caller", "command speaker"
# bench.speech_set's real clips: name prefix -> person. The command and digit recordings are
# one person: their clips are as near one another (cosine 0.74) as one reader's sentences are.
CLIP_SPEAKERS = {
    "librivox/": READER,
    "cards/": CALLER,
    "goforward": COMMANDS,
    "tidigits/": COMMANDS,
}
PAUSE = 0.6
COLLAR = 0.25


Truth = list[tuple[str, float, float]]  # who spoke, from, to (seconds)


def conversation(turns: Sequence[tuple[str, int]], pause: float = PAUSE) -> tuple[bytes, Truth]:
    """WAV of each (speaker, clip index) in turn with a pause between, and the true turns."""
    samples, truth = spoken(turns, pause)
    return wav_of(samples, SAMPLE_RATE), truth


def spoken(
    turns: Sequence[tuple[str, int]], pause: float = PAUSE
) -> tuple[npt.NDArray[np.float32], Truth]:
    """`conversation`'s samples (16 kHz mono) and true turns."""
    silence = np.zeros(round(pause * SAMPLE_RATE), dtype=np.float32)
    parts, truth, at = [], [], 0.0
    for speaker, index in turns:
        clip = voice_clips(speaker)[index]
        parts += [clip, silence]
        truth.append((speaker, at, at + clip.size / SAMPLE_RATE))
        at += (clip.size + silence.size) / SAMPLE_RATE
    return np.concatenate(parts), truth


def speaker_of(clip: Clip) -> str:
    """Who speaks in one of bench.speech_set's real clips."""
    return next(name for prefix, name in CLIP_SPEAKERS.items() if clip.name.startswith(prefix))


def who_said(segments: Sequence[Mapping[str, object]], truth: Truth) -> dict[str, str]:
    """Each label's person: every segment's middle falls in a true turn of the person its
    label stands for (within the collar), one person per label, one label per person."""
    names: dict[str, str] = {}
    for segment in segments:
        start, end = float(segment["start"]), float(segment["end"])  # type: ignore[arg-type]
        middle = (start + end) / 2
        (person,) = [p for p, s, e in truth if s - COLLAR <= middle <= e + COLLAR]
        assert names.setdefault(str(segment["speaker"]), person) == person, segments
    assert len(set(names.values())) == len(names), names
    return names


def reference(person: str, *indices: int) -> npt.NDArray[np.float32]:
    """A clip of `person` alone for a known-speaker reference: the recordings `indices`."""
    return np.concatenate([voice_clips(person)[index] for index in indices])


def data_url(samples: npt.NDArray[np.float32]) -> str:
    """`samples` (16 kHz mono) as a WAV data URL, as known_speaker_references take it."""
    return "data:audio/wav;base64," + base64.b64encode(wav_of(samples, SAMPLE_RATE)).decode()


def diarizer_runs(app: FastAPI) -> float:
    """How many times the app's inference pool has run the diarizer (its own metric)."""
    exposition = app.state.context.metrics.exposition().decode()
    counts = [
        sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name == "voice_service_inference_seconds_count"
        and sample.labels == {"engine": DIARIZER}
    ]
    return sum(counts)
