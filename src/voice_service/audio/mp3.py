"""MP3 encoding of engine output with PyAV (FFmpeg's libmp3lame)."""

from __future__ import annotations

import io

import av
import numpy as np
import numpy.typing as npt

from voice_service.engines.protocols import EngineError, Pcm

DEFAULT_BITRATE = 64_000

# One MPEG-1 Layer III frame. Used to pad empty input, so that every call returns a file
# that decoders accept instead of zero bytes.
_MIN_SAMPLES = 1152


def encode_mp3(pcm: Pcm, bitrate: int = DEFAULT_BITRATE) -> bytes:
    """Encode mono PCM as constant-bitrate MP3 at the PCM's own sample rate.

    The MP3 carries a Xing/LAME header with the encoder delay and padding, so decoders
    return the original number of samples (empty input becomes one frame of silence).
    """
    samples = pcm.samples
    if samples.size == 0:
        samples = np.zeros(_MIN_SAMPLES, dtype=np.int16)
    buffer = io.BytesIO()
    try:
        _encode_into(buffer, samples, pcm.sample_rate, bitrate)
    except av.FFmpegError as error:  # e.g. a voice whose rate libmp3lame cannot take
        raise EngineError(f"MP3 encoding failed: {error}") from error
    return buffer.getvalue()


def _encode_into(
    buffer: io.BytesIO, samples: npt.NDArray[np.int16], sample_rate: int, bitrate: int
) -> None:
    with av.open(buffer, mode="w", format="mp3") as container:
        stream = container.add_stream("libmp3lame", rate=sample_rate, layout="mono")
        stream.bit_rate = bitrate
        # Mono s16p and s16 share one memory layout; libmp3lame takes the planar kind, and
        # PyAV re-chunks one big frame into the encoder's frame size itself.
        frame = av.AudioFrame.from_ndarray(
            np.ascontiguousarray(samples, dtype=np.int16).reshape(1, -1),
            format="s16p",
            layout="mono",
        )
        frame.sample_rate = sample_rate
        frame.pts = 0
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
