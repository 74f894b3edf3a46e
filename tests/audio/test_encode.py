"""Encoding: what comes out must decode back to the same audio length, mono, in every format,
whether streamed or written as one file."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest

from voice_service.audio.encode import (
    FORMATS,
    MP3,
    AudioEncoder,
    AudioFormat,
    OutputFormat,
    encode,
    encode_mp3,
)
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


@pytest.mark.parametrize("fmt", [FORMATS[OutputFormat.WAV], FORMATS[OutputFormat.FLAC]])
@pytest.mark.parametrize("streaming", [False, True])
def test_lossless_formats_keep_every_sample_in_chunks(fmt: AudioFormat, streaming: bool) -> None:
    chunks = [tone(0.5), tone(0.25), Pcm(np.zeros(0, dtype=np.int16), 22050), tone(1.0)]
    encoder = AudioEncoder(fmt, streaming=streaming)
    data = b"".join(encoder.add(chunk) for chunk in chunks) + encoder.finish()
    _, samples, _ = decode(data)
    assert samples == sum(chunk.samples.size for chunk in chunks)


def test_a_stream_sends_bytes_before_it_finishes() -> None:
    encoder = AudioEncoder(MP3, streaming=True)
    assert encoder.add(tone(1.0))  # a second of MP3 is ready at once
    whole = AudioEncoder(MP3, streaming=False)
    assert whole.add(tone(1.0)) == b""  # a file waits for its exact headers


def test_pcm_is_raw_16_bit_at_24_khz() -> None:
    data = encode([tone(1.0)], FORMATS[OutputFormat.PCM])
    assert len(data) == 2 * 24_000


@pytest.mark.parametrize("speed", [0.25, 2.0])
def test_speed_scales_the_duration(speed: float) -> None:
    _, samples, _ = decode(encode([tone(2.0)], FORMATS[OutputFormat.WAV], speed=speed))
    assert samples / 22050 == pytest.approx(2.0 / speed, rel=0.02)


def test_a_stream_of_no_audio_is_still_a_playable_file() -> None:
    encoder = AudioEncoder(MP3, streaming=True)
    _, samples, _ = decode(encoder.finish())
    assert samples > 0  # one frame of silence, not zero bytes
