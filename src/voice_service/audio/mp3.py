"""MP3 encoding of engine output with PyAV (FFmpeg's libmp3lame)."""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

import av
import numpy as np

from voice_service.engines.protocols import EngineError, Pcm

DEFAULT_BITRATE = 64_000

# One MPEG-1 Layer III frame. Used to pad empty input, so that every call returns a file
# that decoders accept instead of zero bytes.
_MIN_SAMPLES = 1152


class Mp3Encoder:
    """Constant-bitrate mono MP3 built from PCM chunks as they are synthesized.

    Only the compressed bytes are kept (8 kB per second at 64 kbps), never the whole PCM.
    The file carries a Xing/LAME header with the encoder delay and padding, so decoders
    return exactly the samples given; no samples at all become one frame of silence.
    """

    def __init__(self, bitrate: int = DEFAULT_BITRATE) -> None:
        self._bitrate = bitrate
        self._buffer = io.BytesIO()
        self._container: av.container.OutputContainer | None = None
        self._stream: av.AudioStream | None = None
        self._sample_rate = 0
        self._samples = 0

    def add(self, pcm: Pcm) -> None:
        """Encode one chunk; every chunk must have the first one's sample rate."""
        try:
            self._encode(pcm)
        except av.FFmpegError as error:  # e.g. a voice whose rate libmp3lame cannot take
            raise EngineError(f"MP3 encoding failed: {error}") from error

    def finish(self) -> bytes:
        """Flush the encoder and return the whole file."""
        if self._samples == 0:
            rate = self._sample_rate or 22_050
            self.add(Pcm(np.zeros(_MIN_SAMPLES, dtype=np.int16), rate))
        assert self._container is not None and self._stream is not None
        try:
            self._mux(self._stream.encode(None))
            self._container.close()  # writes the Xing header's final counts
        except av.FFmpegError as error:
            raise EngineError(f"MP3 encoding failed: {error}") from error
        return self._buffer.getvalue()

    def _encode(self, pcm: Pcm) -> None:
        if self._stream is None:
            self._open(pcm.sample_rate)
        elif pcm.sample_rate != self._sample_rate:
            raise EngineError(
                f"a chunk at {pcm.sample_rate} Hz follows chunks at {self._sample_rate} Hz"
            )
        if pcm.samples.size == 0:
            return
        assert self._stream is not None
        # Mono s16p and s16 share one memory layout; libmp3lame takes the planar kind, and
        # PyAV re-chunks a big frame into the encoder's frame size itself.
        frame = av.AudioFrame.from_ndarray(
            np.ascontiguousarray(pcm.samples, dtype=np.int16).reshape(1, -1),
            format="s16p",
            layout="mono",
        )
        frame.sample_rate = pcm.sample_rate
        frame.pts = self._samples
        self._samples += pcm.samples.size
        self._mux(self._stream.encode(frame))

    def _open(self, sample_rate: int) -> None:
        self._sample_rate = sample_rate
        self._container = av.open(self._buffer, mode="w", format="mp3")
        self._stream = self._container.add_stream("libmp3lame", rate=sample_rate, layout="mono")
        self._stream.bit_rate = self._bitrate

    def _mux(self, packets: Iterable[av.Packet[Any]]) -> None:
        assert self._container is not None
        for packet in packets:
            self._container.mux(packet)


def encode_mp3(pcm: Pcm, bitrate: int = DEFAULT_BITRATE) -> bytes:
    """One whole buffer as MP3 (see `Mp3Encoder`)."""
    encoder = Mp3Encoder(bitrate)
    encoder.add(pcm)
    return encoder.finish()
