"""PCM as float signals: the conversions, level and resampling that analysis, conversion and
base choice all need, kept apart so none of those modules imports another for them.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voice_service.engines.protocols import Pcm

Floats = npt.NDArray[np.float64]


def to_float(pcm: Pcm) -> Floats:
    if pcm.samples.ndim != 1:
        raise ValueError("PCM must be mono")
    return pcm.samples.astype(np.float64) / 32768.0


def to_int16(signal: Floats, target_rms: float) -> npt.NDArray[np.int16]:
    """Match the input's loudness (the equalizer changes it), never clipping."""
    level = rms(signal)
    gain = target_rms / level if level > 0 else 0.0
    peak = float(np.max(np.abs(signal))) * gain if signal.size else 0.0
    if peak > 0.99:
        gain *= 0.99 / peak
    return np.round(signal * gain * 32767.0).astype(np.int16)


def rms(signal: Floats) -> float:
    return float(np.sqrt(np.mean(signal**2))) if signal.size else 0.0


def resample(signal: Floats, rate: int, new_rate: int) -> Floats:
    """Band-limited resampling by FFT (exact for our purpose, and needs no extra package)."""
    if rate == new_rate or signal.size == 0:
        return signal
    length = max(1, round(signal.size * new_rate / rate))
    spectrum = np.fft.rfft(signal)
    kept = min(spectrum.size, length // 2 + 1)
    resized = np.zeros(length // 2 + 1, dtype=np.complex128)
    resized[:kept] = spectrum[:kept]
    return np.asarray(np.fft.irfft(resized, length) * (length / signal.size), dtype=np.float64)
