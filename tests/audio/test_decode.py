"""Streamed, bounded decoding to mono float32, with durations counted from samples."""

from __future__ import annotations

import struct
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
from bench.audio import to_16k

from tests.helpers import speech_clips as sc
from tests.helpers import wav
from voice_service.audio.decode import (
    AudioTooLong,
    NonFiniteAudio,
    UndecodableAudio,
    decode_audio,
)
from voice_service.audio.formats import OPENAI_AUDIO, identify_audio
from voice_service.engines.protocols import Pcm

SECONDS = 1.5


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("decode")
    pcm = sc.tone(SECONDS, rate=22050)
    variants = [*sc.FORMATS, *sc.OPENAI_FORMATS]
    return {v: sc.write_audio(folder / f"{v}.upload", pcm, v) for v in variants}


@pytest.mark.parametrize("variant", sorted([*sc.FORMATS, *sc.OPENAI_FORMATS]))
def test_decodes_every_variant_to_mono_16k(clips: dict[str, Path], variant: str) -> None:
    path = clips[variant]
    audio = decode_audio(path, max_seconds=60, fmt=identify_audio(path, OPENAI_AUDIO))
    assert audio.samples.dtype == np.float32
    assert audio.samples.ndim == 1
    assert audio.sample_rate == 16000
    assert audio.duration_seconds == pytest.approx(SECONDS, abs=0.03)
    assert len(audio.samples) == pytest.approx(SECONDS * 16000, abs=0.03 * 16000)
    # The 0.3-amplitude tone survives every codec (RMS of a sine is amplitude / sqrt 2).
    rms = float(np.sqrt(np.mean(audio.samples**2)))
    assert rms == pytest.approx(0.3 / np.sqrt(2), rel=0.15)


def test_other_output_rate(clips: dict[str, Path]) -> None:
    audio = decode_audio(clips["ogg-opus"], max_seconds=60, rate=22050)
    assert audio.sample_rate == 22050
    assert len(audio.samples) == pytest.approx(SECONDS * 22050, abs=0.03 * 22050)
    assert audio.duration_seconds == pytest.approx(SECONDS, abs=0.03)


def test_stereo_is_downmixed(tmp_path: Path) -> None:
    # Left carries a tone, right is silent: the mono mix keeps the tone at reduced level.
    tone = sc.tone(1.0, rate=48000).samples
    stereo = np.stack([tone, np.zeros_like(tone)]).T.reshape(1, -1)
    path = _write_packed(tmp_path / "stereo", "wav", "pcm_s16le", "stereo", stereo)
    audio = decode_audio(path, max_seconds=60)
    assert audio.duration_seconds == pytest.approx(1.0, abs=1e-3)
    rms = float(np.sqrt(np.mean(audio.samples**2)))
    assert 0.05 < rms < 0.3 / np.sqrt(2)


def test_duration_comes_from_samples_not_the_header(clips: dict[str, Path], tmp_path: Path) -> None:
    # A WAV whose RIFF and data sizes claim ~4 GB: the decoder must count what is there.
    data = bytearray(clips["wav-s16"].read_bytes())
    data[4:8] = struct.pack("<I", 0xFFFFFFF0)
    data_at = data.index(b"data")
    data[data_at + 4 : data_at + 8] = struct.pack("<I", 0xFFFFFF00)
    path = tmp_path / "lying.wav"
    path.write_bytes(bytes(data))
    audio = decode_audio(path, max_seconds=60)
    assert audio.duration_seconds == pytest.approx(SECONDS, abs=0.01)


def test_refuses_audio_longer_than_the_maximum(clips: dict[str, Path]) -> None:
    with pytest.raises(AudioTooLong):
        decode_audio(clips["mp3"], max_seconds=1.0)
    assert decode_audio(clips["mp3"], max_seconds=2.0).duration_seconds < 2.0


def test_tiny_file_that_decodes_to_hours_is_refused(tmp_path: Path) -> None:
    path = sc.long_silent_ogg_opus(tmp_path / "bomb.ogg", seconds=3 * 3600)
    assert path.stat().st_size < 3 * 1024 * 1024
    assert identify_audio(path) is not None
    # The decode stops as the count passes 30 s (no wall-clock check: CI machines are shared).
    with pytest.raises(AudioTooLong):
        decode_audio(path, max_seconds=30)


@pytest.mark.parametrize("variant", ["wav-s16", "mp3", "ogg-opus", "webm-vorbis"])
def test_truncated_file_returns_what_decoded(
    clips: dict[str, Path], tmp_path: Path, variant: str
) -> None:
    data = clips[variant].read_bytes()
    path = tmp_path / "cut"
    path.write_bytes(data[: len(data) * 2 // 3])
    audio = decode_audio(path, max_seconds=60)
    assert 0.3 < audio.duration_seconds < SECONDS
    assert len(audio.samples) > 0


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not audio at all " * 100,
        b"ID3\x04\x00\x00\x00\x00\x00\x00" + bytes(range(256)) * 40,
        b"OggS\x00\x02" + bytes(22) + bytes(range(256)) * 40,
    ],
    ids=["empty", "text", "id3-garbage", "ogg-garbage"],
)
def test_undecodable(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "junk"
    path.write_bytes(content)
    with pytest.raises(UndecodableAudio):
        decode_audio(path, max_seconds=60)


def test_speech_survives_the_round_trip(tmp_path: Path) -> None:
    # Decoded speech lines up with the source resampled directly (same length, correlated).
    pcm: Pcm = sc.english_speech()
    path = sc.write_audio(tmp_path / "speech", pcm, "wav-s16")
    audio = decode_audio(path, max_seconds=60)
    reference = to_16k(pcm)
    n = min(len(reference), len(audio.samples))
    assert abs(len(reference) - len(audio.samples)) < 160
    assert np.corrcoef(reference[:n], audio.samples[:n])[0, 1] > 0.99


def test_zero_bit_wav_is_undecodable(tmp_path: Path) -> None:
    path = tmp_path / "zero-bits.wav"
    path.write_bytes(wav.zero_bit_wav())
    with pytest.raises(UndecodableAudio):
        decode_audio(path, max_seconds=60)


def test_unexpected_pyav_failure_is_undecodable_and_logged(
    clips: dict[str, Path], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken_resampler(*args: object, **kwargs: object) -> None:
        raise ValueError("surprise")

    monkeypatch.setattr(av, "AudioResampler", broken_resampler)
    with pytest.raises(UndecodableAudio):
        decode_audio(clips["wav-s16"], max_seconds=60)
    assert any(r.levelname == "WARNING" and r.exc_info for r in caplog.records)


def _write_float_wav(tmp_path: Path, values: np.ndarray, bits: int, rate: int) -> Path:
    dtype = "<f4" if bits == 32 else "<f8"
    path = tmp_path / "float.wav"
    path.write_bytes(
        wav.wav_bytes(
            values.astype(dtype).tobytes(), rate=rate, bits=bits, format_tag=wav.IEEE_FLOAT
        )
    )
    return path


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize(("bits", "rate"), [(32, 16000), (64, 44100)])
def test_non_finite_samples_are_refused(tmp_path: Path, value: float, bits: int, rate: int) -> None:
    path = _write_float_wav(tmp_path, np.full(8192, value), bits, rate)
    with pytest.raises(NonFiniteAudio):
        decode_audio(path, max_seconds=60, fmt=identify_audio(path))


def test_one_non_finite_sample_late_in_the_file_is_refused(tmp_path: Path) -> None:
    values = np.zeros(5 * 16000)
    values[-10] = np.nan
    with pytest.raises(NonFiniteAudio):
        decode_audio(_write_float_wav(tmp_path, values, 32, 16000), max_seconds=60)


@pytest.mark.parametrize(("bits", "value"), [(32, 1e30), (32, -3e38), (64, 1e300)])
def test_huge_finite_samples_are_clipped(tmp_path: Path, bits: int, value: float) -> None:
    values = np.full(16000, value)
    values[::2] = -value  # a full-scale square wave, the worst case for the resampler
    for rate in (16000, 44100):
        audio = decode_audio(_write_float_wav(tmp_path, values, bits, rate), max_seconds=60)
        assert np.isfinite(audio.samples).all()
        assert np.abs(audio.samples).max() <= 1.0


def test_eight_channel_planar_audio_decodes(tmp_path: Path) -> None:
    # PyAV's AudioFrame.planes reads past the plane pointers of 8-channel planar frames and
    # crashed the process when the decoder looked at the frames themselves (found by fuzzing).
    tone = sc.tone(0.5, rate=48000).samples
    interleaved = np.repeat(tone, 8).reshape(1, -1)  # packed: PyAV's bug is planar only
    path = _write_packed(tmp_path / "surround.m4a", "mp4", "aac", "7.1", interleaved)
    audio = decode_audio(path, max_seconds=60, fmt=identify_audio(path))
    assert audio.duration_seconds == pytest.approx(0.5, abs=0.05)
    assert float(np.sqrt(np.mean(audio.samples**2))) > 0.05


def test_frames_of_a_layout_no_recording_has_are_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # 37 channels in no known order: the resampler cannot mix them (a fuzzed AAC stream
    # switched to this mid-way). The probe refuses such a stream; the decoder skips it.
    path = tmp_path / "37-channels.wav"
    path.write_bytes(wav.wav_bytes(bytes(2 * 37 * 1600), rate=16000, channels=37))
    with pytest.raises(UndecodableAudio):
        decode_audio(path, max_seconds=60)
    assert not caplog.records


def test_truncate_keeps_the_first_seconds_instead_of_refusing(tmp_path: Path) -> None:
    path = sc.long_silent_ogg_opus(tmp_path / "long.ogg", seconds=600)
    audio = decode_audio(path, max_seconds=30, truncate=True)
    assert 29 <= audio.duration_seconds <= 30
    assert audio.samples.size == audio.duration_seconds * audio.sample_rate


def _write_packed(
    path: Path, container_format: str, codec: str, layout: str, interleaved: np.ndarray
) -> Path:
    """One packed s16 frame of 48 kHz audio in `layout`, encoded with `codec`."""
    with av.open(str(path), "w", format=container_format) as container:
        stream = container.add_stream(codec, rate=48000, layout=layout)
        frame = av.AudioFrame.from_ndarray(interleaved, format="s16", layout=layout)
        frame.sample_rate = 48000
        frame.pts = 0
        frame.time_base = Fraction(1, 48000)
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    return path
