"""Durations are exact sample counts over their rate, so billing rounds up whole seconds only.

A float sum of frame durations once made a 5.000 s 16 kHz file 5.000000000001 s, billed 6.
"""

from __future__ import annotations

import io
import math
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from tests.helpers.wav import silent_wav
from voice_service.audio.decode import AudioTooLong, decode_audio
from voice_service.audio.formats import identify_audio
from voice_service.transcription.service import billed_seconds

RATES = (8000, 11025, 16000, 22050, 44100, 48000)


def _lengths(rate: int) -> list[tuple[str, int]]:
    cases = [("1-sample", 1), ("7-samples", 7)]
    for seconds in (1, 2, 5):
        whole = seconds * rate
        cases += [
            (f"{seconds}s", whole),
            (f"{seconds}s+1", whole + 1),
            (f"{seconds}s-1", whole - 1),
        ]
    return cases


SWEEP = [(rate, samples) for rate in RATES for _, samples in _lengths(rate)]
SWEEP_IDS = [f"{rate}Hz-{name}" for rate in RATES for name, _ in _lengths(rate)]


def _decode_wav(tmp_path: Path, data: bytes, max_seconds: float = 60) -> Fraction:
    path = tmp_path / "clip.wav"
    path.write_bytes(data)
    return decode_audio(path, max_seconds=max_seconds, fmt=identify_audio(path)).duration_seconds


def _billed(duration: Fraction) -> int:
    return billed_seconds(duration)


@pytest.mark.parametrize(("rate", "samples"), SWEEP, ids=SWEEP_IDS)
def test_duration_and_units_are_exact(tmp_path: Path, rate: int, samples: int) -> None:
    duration = _decode_wav(tmp_path, silent_wav(samples, rate))
    assert duration == Fraction(samples, rate)
    assert _billed(duration) == -(-samples // rate)  # integer ceiling


@pytest.mark.parametrize("rate", RATES)
def test_limit_is_exact_at_the_boundary(tmp_path: Path, rate: int) -> None:
    assert _decode_wav(tmp_path, silent_wav(2 * rate, rate), max_seconds=2.0) == 2
    with pytest.raises(AudioTooLong):
        _decode_wav(tmp_path, silent_wav(2 * rate + 1, rate), max_seconds=2.0)


def test_unknown_duration_bills_one_unit() -> None:
    assert _billed(Fraction(0)) == 1


def _silent_mp3(rate: int, seconds: float) -> bytes:
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp3", options={"id3v2_version": "0"}) as container:
        stream = container.add_stream("libmp3lame", rate=rate, layout="mono")
        frame = av.AudioFrame.from_ndarray(
            np.zeros((1, int(rate * seconds)), dtype=np.int16), format="s16", layout="mono"
        )
        frame.sample_rate = rate
        frame.pts = 0
        frame.time_base = Fraction(1, rate)
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    return buffer.getvalue()


def test_rate_changing_midway_sums_exact_fractions(tmp_path: Path) -> None:
    # Concatenated MP3s at three rates: each run counts its samples at its own rate.
    path = tmp_path / "chained.mp3"
    path.write_bytes(_silent_mp3(22050, 0.5) + _silent_mp3(16000, 0.5) + _silent_mp3(24000, 0.3))
    samples_per_rate: dict[int, int] = {}
    with av.open(str(path)) as container:
        for frame in container.decode(audio=0):
            rate = frame.sample_rate
            samples_per_rate[rate] = samples_per_rate.get(rate, 0) + frame.samples
    assert set(samples_per_rate) == {22050, 16000, 24000}
    expected = sum((Fraction(n, rate) for rate, n in samples_per_rate.items()), Fraction(0))
    duration = decode_audio(path, max_seconds=60, fmt=identify_audio(path)).duration_seconds
    assert duration == expected
    assert _billed(duration) == math.ceil(expected) == 2
    # The bound holds exactly across the runs: a bound one float step under the length
    # refuses it, one step over accepts it.
    under, over = (math.nextafter(float(expected), to) for to in (0.0, math.inf))
    with pytest.raises(AudioTooLong):
        decode_audio(path, max_seconds=under)
    assert decode_audio(path, max_seconds=over).duration_seconds == expected
