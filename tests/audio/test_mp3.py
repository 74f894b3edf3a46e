"""MP3 encoding: what comes out must decode back to the same audio length, mono."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest

from voice_service.audio.mp3 import encode_mp3
from voice_service.engines.protocols import Pcm


def tone(seconds: float, sample_rate: int = 22050) -> Pcm:
    t = np.arange(round(seconds * sample_rate)) / sample_rate
    return Pcm((np.sin(2 * np.pi * 440 * t) * 10_000).astype(np.int16), sample_rate)


def decode(data: bytes) -> tuple[av.AudioStream, int, np.ndarray]:
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        frames = [frame.to_ndarray() for frame in container.decode(stream)]
    return stream, sum(frame.shape[-1] for frame in frames), np.concatenate(frames, axis=-1)


@pytest.mark.parametrize("sample_rate", [16000, 22050, 24000, 44100])
def test_mp3_decodes_to_mono_with_the_same_number_of_samples(sample_rate: int) -> None:
    pcm = tone(2.5, sample_rate)
    stream, samples, _ = decode(encode_mp3(pcm))
    assert stream.codec_context.name.startswith("mp3")
    assert stream.codec_context.layout.nb_channels == 1
    assert stream.rate == sample_rate
    assert samples == len(pcm.samples)


def test_mp3_has_the_requested_bitrate() -> None:
    data = encode_mp3(tone(3.0))
    stream, _, _ = decode(data)
    assert stream.bit_rate >= 64_000
    assert len(data) * 8 / 3.0 == pytest.approx(64_000, rel=0.1)
    stream, _, _ = decode(encode_mp3(tone(3.0), bitrate=128_000))
    assert stream.bit_rate >= 128_000


def test_mp3_keeps_the_signal() -> None:
    _, _, decoded = decode(encode_mp3(tone(1.0)))
    # A 440 Hz tone at a third of full scale survives lossy coding at roughly that level.
    assert np.sqrt(np.mean(decoded[0, 2000:-2000] ** 2)) == pytest.approx(0.216, rel=0.1)


def test_mp3_of_empty_audio_is_still_a_decodable_file() -> None:
    _, samples, _ = decode(encode_mp3(Pcm(np.zeros(0, dtype=np.int16), 22050)))
    assert samples > 0
