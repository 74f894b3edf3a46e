"""Tempo without a pitch change (FFmpeg's atempo, through PyAV): what a provider's speech is
sped up or slowed down by where its API takes no speed, and the part of a requested speed
an engine cannot reach by itself (`engines.protocols.TextToSpeech.speeds`)."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import av
import numpy as np

from voice_service.engines.protocols import Pcm

# atempo changes tempo by 0.5 to 100 per filter; slower speeds chain several.
_MIN_TEMPO_STEP = 0.5


class Tempo:
    """FFmpeg's atempo filters, chained to reach `speed`, fed 16-bit mono frames."""

    def __init__(self, sample_rate: int, speed: float) -> None:
        self._graph = av.filter.Graph()
        node = self._graph.add_abuffer(
            format="s16", sample_rate=sample_rate, layout="mono", time_base=Fraction(1, sample_rate)
        )
        for step in tempo_steps(speed):
            following = self._graph.add("atempo", f"{step:.6f}")
            node.link_to(following)
            node = following
        node.link_to(self._graph.add("abuffersink"))
        self._graph.configure()

    def push(self, frame: av.AudioFrame) -> list[av.AudioFrame]:
        self._graph.push(frame)
        return list(self._pull())

    def flush(self) -> list[av.AudioFrame]:
        self._graph.push(None)
        return list(self._pull())

    def _pull(self) -> Iterator[av.AudioFrame]:
        while True:
            try:
                frame = self._graph.pull()
            except (av.BlockingIOError, av.EOFError):
                return
            assert isinstance(frame, av.AudioFrame)
            yield frame


def tempo_steps(speed: float) -> list[float]:
    """atempo factors whose product is `speed`, each within the filter's range."""
    steps = []
    while speed < _MIN_TEMPO_STEP:
        steps.append(_MIN_TEMPO_STEP)
        speed /= _MIN_TEMPO_STEP
    return [*steps, speed]


def stretched(pcm: Pcm, speed: float) -> Pcm:
    """`pcm` said `speed` times as fast, its word times moved with it."""
    if speed == 1.0 or pcm.samples.size == 0:
        return pcm
    tempo = Tempo(pcm.sample_rate, speed)
    frames = tempo.push(pcm_frame(pcm.samples, pcm.sample_rate, 0)) + tempo.flush()
    samples = np.concatenate([frame.to_ndarray().reshape(-1) for frame in frames])
    times = tuple((start / speed, end / speed) for start, end in pcm.word_times)
    return Pcm(samples.astype(np.int16), pcm.sample_rate, times)


def pcm_frame(samples: Any, sample_rate: int, pts: int) -> av.AudioFrame:
    """16-bit mono samples as a frame starting `pts` samples in."""
    frame = av.AudioFrame.from_ndarray(
        np.ascontiguousarray(samples, dtype=np.int16).reshape(1, -1), format="s16", layout="mono"
    )
    frame.sample_rate = sample_rate
    frame.pts = pts
    frame.time_base = Fraction(1, sample_rate)
    return frame
