"""Tempo without a pitch change: what speeds up speech past what its engine can do."""

from __future__ import annotations

import math

import numpy as np
import pytest

from voice_service.audio.tempo import stretched, tempo_steps
from voice_service.engines.protocols import Pcm


@pytest.mark.parametrize("speed", [0.25, 0.4, 0.5, 1.5, 4.0])
def test_tempo_steps_multiply_to_the_speed_within_the_filter_s_range(speed: float) -> None:
    steps = tempo_steps(speed)
    assert math.prod(steps) == pytest.approx(speed)
    assert all(0.5 <= step <= 100 for step in steps)


@pytest.mark.parametrize("speed", [0.3, 3.0])
def test_a_stretched_chunk_lasts_its_length_over_the_speed_at_the_same_pitch(speed: float) -> None:
    rate = 16_000
    t = np.arange(2 * rate) / rate
    pcm = Pcm((np.sin(2 * np.pi * 300 * t) * 10_000).astype(np.int16), rate, ((0.5, 1.5),))

    fast = stretched(pcm, speed)

    assert fast.sample_rate == rate
    assert fast.duration_seconds == pytest.approx(2.0 / speed, rel=0.02)
    ((start, end),) = fast.word_times
    assert (start, end) == pytest.approx((0.5 / speed, 1.5 / speed))
    spectrum = np.abs(np.fft.rfft(fast.samples.astype(np.float64)))
    assert np.argmax(spectrum) * rate / fast.samples.size == pytest.approx(300, rel=0.02)


def test_speed_one_and_silence_are_left_as_they_are() -> None:
    pcm = Pcm(np.ones(100, dtype=np.int16), 16_000)
    assert stretched(pcm, 1.0) is pcm
    empty = Pcm(np.zeros(0, dtype=np.int16), 16_000)
    assert stretched(empty, 2.0) is empty
