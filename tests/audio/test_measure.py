"""A job's upload measured: refused at once when its container states it is too long,
otherwise counted by decoding, a step at a time, up to the limit and no further; a float
file holding a non-number is refused while it is measured."""

from __future__ import annotations

import io
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from tests.audio.long_files import ogg_stating, stated_seconds, unstated_webm
from tests.helpers import speech_clips as sc
from tests.helpers import wav
from voice_service.audio.decode import (
    MEASURE_STEP_SECONDS,
    AudioTooLong,
    NonFiniteAudio,
    decode_audio,
    measuring,
)
from voice_service.audio.formats import identify_audio


def measured(path: Path, max_seconds: float) -> Fraction:
    *_, duration = measuring(path, max_seconds=max_seconds, fmt=identify_audio(path))
    return duration


def test_a_container_stating_more_than_the_limit_is_refused_without_decoding(
    tmp_path: Path,
) -> None:
    path = ogg_stating(tmp_path / "states-10h.ogg", stated_seconds=36_000, holding_seconds=1.2)
    # It holds 1.2 s: counting decoded samples would accept it; only its statement refuses.
    assert decode_audio(path, max_seconds=60).duration_seconds < 2
    with pytest.raises(AudioTooLong):
        measured(path, max_seconds=14_400)


def test_a_stated_duration_past_the_limit_by_an_encoders_delay_is_decoded(
    tmp_path: Path,
) -> None:
    # Ogg Opus states its pre-skip too: 60 s of audio says 60.0065 s.
    path = sc.long_silent_ogg_opus(tmp_path / "60s.ogg", seconds=60)
    assert stated_seconds(path) > 60
    assert measured(path, max_seconds=60) == pytest.approx(60, abs=0.01)


def test_audio_no_header_states_is_counted_and_refused_once_past_the_limit(
    tmp_path: Path,
) -> None:
    path = unstated_webm(tmp_path / "live.webm", seconds=600)
    assert stated_seconds(path) == 0
    assert measured(path, max_seconds=600) == pytest.approx(600, abs=0.01)
    with pytest.raises(AudioTooLong):
        measured(path, max_seconds=300)


def test_an_mp3_duration_estimated_from_its_bit_rate_is_not_trusted(tmp_path: Path) -> None:
    # No Xing header: FFmpeg estimates from the first frame's bit rate (1 s of silence at
    # 32 kb/s), then 19 s of noise at 320 kb/s follow.
    rate = 44_100
    noise = np.random.default_rng(0).normal(0, 0.3, 19 * rate)
    path = tmp_path / "vbr.mp3"
    path.write_bytes(_mp3(np.zeros(rate), rate, 32_000) + _mp3(noise, rate, 320_000))
    assert stated_seconds(path) > 60
    assert measured(path, max_seconds=30) == pytest.approx(20, abs=0.1)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("bits", [32, 64])
def test_a_float_wav_whose_last_sample_is_not_a_number_is_refused(
    tmp_path: Path, value: float, bits: int
) -> None:
    values = np.zeros(5 * 16_000)
    values[-1] = value
    dtype = "<f4" if bits == 32 else "<f8"
    path = tmp_path / "float.wav"
    path.write_bytes(
        wav.wav_bytes(
            values.astype(dtype).tobytes(), rate=16_000, bits=bits, format_tag=wav.IEEE_FLOAT
        )
    )
    with pytest.raises(NonFiniteAudio):
        measured(path, max_seconds=60)


def test_audio_is_counted_a_step_at_a_time(tmp_path: Path) -> None:
    path = sc.long_silent_ogg_opus(tmp_path / "5min.ogg", seconds=300)
    counts = list(measuring(path, max_seconds=600, fmt=identify_audio(path)))
    assert len(counts) >= 300 // MEASURE_STEP_SECONDS
    assert counts == sorted(counts)
    assert counts[-1] == pytest.approx(300, abs=0.01)


def _mp3(samples: np.ndarray, rate: int, bit_rate: int) -> bytes:
    """Bare MP3 frames: no ID3 tag, no Xing header."""
    buffer = io.BytesIO()
    options = {"write_xing": "0", "id3v2_version": "0"}
    with av.open(buffer, "w", format="mp3", options=options) as container:
        stream = container.add_stream("libmp3lame", rate=rate, layout="mono")
        stream.codec_context.bit_rate = bit_rate
        pcm = (np.clip(samples, -1, 1) * 32767).astype(np.int16).reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
        frame.sample_rate, frame.pts, frame.time_base = rate, 0, Fraction(1, rate)
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    return buffer.getvalue()
