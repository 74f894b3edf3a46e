"""Audio a realtime client sends, as Whisper and the VAD take it: mono float32 at 16 kHz.

OpenAI's three input formats: 16-bit little-endian PCM at 24 kHz (`audio/pcm`), and G.711
μ-law and A-law at 8 kHz (`audio/pcmu`, `audio/pcma`), as phone lines carry them. Pieces
arrive in any size (an odd byte of PCM waits for its pair); the resampler keeps its state
between them, so the audio is the same however it was cut.
"""

from __future__ import annotations

from enum import StrEnum
from fractions import Fraction

import av
import numpy as np
import numpy.typing as npt

from voice_service.audio.raw_pcm import joined
from voice_service.audio.vad import RATE, Floats


class InputFormat(StrEnum):
    PCM = "audio/pcm"
    PCMU = "audio/pcmu"
    PCMA = "audio/pcma"

    @property
    def rate(self) -> int:
        return 24_000 if self is InputFormat.PCM else 8_000

    @property
    def bytes_per_sample(self) -> int:
        return 2 if self is InputFormat.PCM else 1


def _ulaw_table() -> npt.NDArray[np.int16]:
    """G.711 μ-law: each byte's 16-bit sample (ITU-T G.711, as FFmpeg decodes it)."""
    codes = ~np.arange(256, dtype=np.int32) & 0xFF
    exponent = (codes >> 4) & 0x07
    mantissa = codes & 0x0F
    magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84
    return np.where(codes & 0x80, -magnitude, magnitude).astype(np.int16)


def _alaw_table() -> npt.NDArray[np.int16]:
    """G.711 A-law: each byte's 16-bit sample."""
    codes = np.arange(256, dtype=np.int32) ^ 0x55
    exponent = (codes >> 4) & 0x07
    mantissa = codes & 0x0F
    magnitude = np.where(
        exponent == 0, (mantissa << 4) + 8, ((mantissa << 4) + 0x108) << np.maximum(exponent - 1, 0)
    )
    return np.where(codes & 0x80, magnitude, -magnitude).astype(np.int16)


_G711 = {InputFormat.PCMU: _ulaw_table(), InputFormat.PCMA: _alaw_table()}


class InputAudio:
    """A session's incoming audio, piece by piece, as 16 kHz float32."""

    def __init__(self, fmt: InputFormat) -> None:
        self.format = fmt
        self._pending = b""  # an odd byte of 16-bit PCM, until its pair arrives
        self._resampler = av.AudioResampler(format="flt", layout="mono", rate=RATE)
        self._samples_in = 0

    @property
    def seconds_received(self) -> Fraction:
        """Exactly how much audio arrived, at the client's own rate."""
        return Fraction(self._samples_in, self.format.rate)

    def seconds_with(self, data: bytes) -> Fraction:
        """`seconds_received` once `data` is added."""
        samples = (len(self._pending) + len(data)) // self.format.bytes_per_sample
        return Fraction(self._samples_in + samples, self.format.rate)

    def add(self, data: bytes) -> Floats:
        """The 16 kHz audio `data` completes (a resampler holds back a few samples)."""
        data = self._pending + data
        usable = len(data) - len(data) % self.format.bytes_per_sample
        self._pending = data[usable:]
        if usable == 0:
            return np.zeros(0, dtype=np.float32)
        if self.format is InputFormat.PCM:
            samples = np.frombuffer(data[:usable], dtype="<i2")
        else:
            samples = _G711[self.format][np.frombuffer(data[:usable], dtype=np.uint8)]
        frame = av.AudioFrame.from_ndarray(
            np.ascontiguousarray(samples, dtype=np.int16).reshape(1, -1),
            format="s16",
            layout="mono",
        )
        frame.sample_rate = self.format.rate
        frame.pts = self._samples_in
        frame.time_base = Fraction(1, self.format.rate)
        self._samples_in += samples.size
        return joined(self._resampler.resample(frame))
