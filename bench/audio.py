"""PCM conversions the benchmark shares: resampled with PyAV, as the service's decoder does."""

from __future__ import annotations

from typing import Any

import av
import numpy as np
import numpy.typing as npt

from voice_service.engines.protocols import Pcm

WHISPER_RATE = 16_000  # Whisper's rate, and the only one DNSMOS and the d-vector accept


def resample(pcm: Pcm, rate: int, sample_format: str = "flt") -> npt.NDArray[Any]:
    """`pcm` as mono samples at `rate` in PyAV's `sample_format` ("flt", "s16", ...)."""
    resampler = av.AudioResampler(format=sample_format, layout="mono", rate=rate)
    frame = av.AudioFrame.from_ndarray(pcm.samples.reshape(1, -1), format="s16", layout="mono")
    frame.sample_rate = pcm.sample_rate
    frames = resampler.resample(frame) + resampler.resample(None)
    return np.concatenate([out.to_ndarray().reshape(-1) for out in frames])


def to_16k(pcm: Pcm) -> npt.NDArray[np.float32]:
    """Mono float32 at 16 kHz, as the service's decoder hands uploads to Whisper."""
    return resample(pcm, WHISPER_RATE).astype(np.float32)
