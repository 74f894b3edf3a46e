"""Raw PCM as a client streams it (any rate, 8/16/32-bit, mono or stereo), turned piece by
piece into what Whisper and the VAD take: mono float32 at 16 kHz. A piece may end mid
sample; the resampler keeps its state between pieces, so the audio is the same however it
was cut."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import av
import numpy as np

from voice_service.audio.vad import RATE, Floats

# Bytes per sample → PyAV's packed sample format and NumPy's type (8-bit PCM is unsigned).
_SAMPLE_TYPES: dict[int, tuple[str, np.dtype[Any]]] = {
    1: ("u8", np.dtype(np.uint8)),
    2: ("s16", np.dtype("<i2")),
    4: ("s32", np.dtype("<i4")),
}
_LAYOUTS = {1: "mono", 2: "stereo"}
LOWEST_RATE, HIGHEST_RATE = 8_000, 192_000


@dataclass(frozen=True, slots=True)
class PcmFormat:
    rate: int  # samples per second
    width: int  # bytes per sample
    channels: int

    def problem(self) -> str | None:
        """Why this format is not taken; None if it is."""
        if not LOWEST_RATE <= self.rate <= HIGHEST_RATE:
            return f"a rate of {self.rate} Hz (from {LOWEST_RATE} to {HIGHEST_RATE})"
        if self.width not in _SAMPLE_TYPES:
            return f"{self.width}-byte samples (1, 2 or 4)"
        if self.channels not in _LAYOUTS:
            return f"{self.channels} channels (1 or 2)"
        return None

    @property
    def frame_bytes(self) -> int:
        return self.width * self.channels


class RawPcmIn:
    """One stream of raw PCM in `fmt` (checked first: `PcmFormat.problem`)."""

    def __init__(self, fmt: PcmFormat) -> None:
        assert fmt.problem() is None, fmt.problem()
        self.format = fmt
        self._sample_format, self._dtype = _SAMPLE_TYPES[fmt.width]
        self._pending = b""  # the start of a frame whose end has not arrived
        self._resampler = av.AudioResampler(format="flt", layout="mono", rate=RATE)
        self._frames_in = 0

    @property
    def seconds_received(self) -> Fraction:
        """Exactly how much audio arrived, at the client's own rate."""
        return Fraction(self._frames_in, self.format.rate)

    def seconds_with(self, data: bytes) -> Fraction:
        """`seconds_received` once `data` is added."""
        frames = (len(self._pending) + len(data)) // self.format.frame_bytes
        return Fraction(self._frames_in + frames, self.format.rate)

    def add(self, data: bytes) -> Floats:
        """The 16 kHz audio `data` completes (a resampler holds back a few samples)."""
        data = self._pending + data
        usable = len(data) - len(data) % self.format.frame_bytes
        self._pending = data[usable:]
        if usable == 0:
            return np.zeros(0, dtype=np.float32)
        samples = np.frombuffer(data[:usable], dtype=self._dtype).reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(
            samples, format=self._sample_format, layout=_LAYOUTS[self.format.channels]
        )
        frame.sample_rate = self.format.rate
        frame.pts = self._frames_in
        frame.time_base = Fraction(1, self.format.rate)
        self._frames_in += usable // self.format.frame_bytes
        return _joined(self._resampler.resample(frame))

    def finish(self) -> Floats:
        """What the resampler still holds."""
        return _joined(self._resampler.resample(None))


def _joined(frames: list[av.AudioFrame]) -> Floats:
    if not frames:
        return np.zeros(0, dtype=np.float32)
    return np.concatenate([frame.to_ndarray().reshape(-1) for frame in frames]).astype(np.float32)
