"""Audio a realtime client sends, as Whisper and the VAD take it: mono float32 at 16 kHz.

OpenAI's three input formats: 16-bit little-endian PCM at 24 kHz (`audio/pcm`), and G.711
μ-law and A-law at 8 kHz (`audio/pcmu`, `audio/pcma`), as phone lines carry them. Pieces
arrive in any size (an odd byte of PCM waits for its pair); the resampler keeps its state
between them, so the audio is the same however it was cut.
"""

from __future__ import annotations

from enum import StrEnum
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from voice_service.audio.raw_pcm import PcmFormat, RawPcmIn
from voice_service.audio.vad import Floats


class InputFormat(StrEnum):
    PCM = "audio/pcm"
    PCMU = "audio/pcmu"
    PCMA = "audio/pcma"

    @property
    def rate(self) -> int:
        return 24_000 if self is InputFormat.PCM else 8_000


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
    """A session's incoming audio, piece by piece, as 16 kHz float32: PCM as it comes,
    G.711 turned into 16-bit samples first."""

    def __init__(self, fmt: InputFormat) -> None:
        self.format = fmt
        self._pcm = RawPcmIn(PcmFormat(fmt.rate, 2, 1))

    @property
    def seconds_received(self) -> Fraction:
        """Exactly how much audio arrived, at the client's own rate."""
        return self._pcm.seconds_received

    def seconds_with(self, data: bytes) -> Fraction:
        """`seconds_received` once `data` is added."""
        if self.format is InputFormat.PCM:
            return self._pcm.seconds_with(data)
        return self._pcm.seconds_received + Fraction(len(data), self.format.rate)

    def add(self, data: bytes) -> Floats:
        """The 16 kHz audio `data` completes (a resampler holds back a few samples)."""
        if self.format is not InputFormat.PCM:
            data = _G711[self.format][np.frombuffer(data, dtype=np.uint8)].astype("<i2").tobytes()
        return self._pcm.add(data)
