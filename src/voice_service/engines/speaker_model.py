"""A speaker model the operator names (`VOICE_SERVICE_SPEAKER_MODEL`): an ONNX file in
sherpa-onnx's layout for speaker embeddings, as 3D-Speaker's CAM++ and ERes2Net and
WeSpeaker's ResNets are published there.

Such a file takes Kaldi filterbank frames (1 x frames x bands) and gives one embedding, and
says in its metadata what it was trained on: `sample_rate`, `output_dim`, `normalize_samples`
(0: samples scaled to 16-bit integers first) and `feature_normalize_type` ("global-mean":
each band's mean over the clip subtracted). The frames are computed as sherpa-onnx computes
them (`kaldi-native-fbank`, its defaults for speaker models), so a file behaves here as it
does there; a file that asks for anything else is refused at start.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Final

import kaldi_native_fbank
import numpy as np
import numpy.typing as npt
import onnxruntime

from voice_service.engines.onnx_session import DEFAULT_INTRA_OP_THREADS, session_options
from voice_service.engines.speaker_embedding import SAMPLE_RATE, Embedding

_FEATURE_NORMALIZATIONS: Final = ("", "global-mean")
_LOW_HZ: Final = 20.0
_HIGH_HZ: Final = -400.0  # below the Nyquist frequency, as sherpa-onnx's extractor
_INT16_SCALE: Final = 32768.0
_MIN_SAMPLES: Final = 400  # one 25 ms frame: shorter audio is padded with silence to it


class UnusableSpeakerModel(ValueError):
    """The file is not a speaker model in sherpa-onnx's layout this service can run."""


class SpeakerModel:
    """Unit speaker embeddings of 16 kHz mono speech; `embed` is safe from many threads."""

    def __init__(self, path: Path, *, intra_op_threads: int = DEFAULT_INTRA_OP_THREADS) -> None:
        if not path.is_file():
            raise UnusableSpeakerModel(f"{path}: no such file")
        try:
            self._session = onnxruntime.InferenceSession(
                str(path),
                sess_options=session_options(intra_op_threads),
                providers=["CPUExecutionProvider"],
            )
        except Exception as exc:  # onnxruntime raises its own errors for a bad file
            raise UnusableSpeakerModel(f"{path}: not an ONNX model ({exc})") from None
        metadata = self._session.get_modelmeta().custom_metadata_map
        inputs = self._session.get_inputs()
        bands = inputs[0].shape[-1] if len(inputs) == 1 and len(inputs[0].shape) == 3 else None
        if not isinstance(bands, int) or not metadata.get("output_dim", "").isdigit():
            raise UnusableSpeakerModel(
                f"{path}: not a speaker model in sherpa-onnx's layout (one input of frames x "
                "filterbank bands, output_dim in its metadata)"
            )
        if metadata.get("sample_rate") != str(SAMPLE_RATE):
            rate = metadata.get("sample_rate")
            raise UnusableSpeakerModel(f"{path}: sample_rate {rate!r} in its metadata, not 16000")
        normalization = metadata.get("feature_normalize_type", "")
        if normalization not in _FEATURE_NORMALIZATIONS:
            raise UnusableSpeakerModel(f"{path}: feature_normalize_type {normalization!r}")
        self._input = inputs[0].name
        self._mean_normalized = normalization == "global-mean"
        self._scale = 1.0 if metadata.get("normalize_samples", "1") != "0" else _INT16_SCALE
        self.dimensions = int(metadata["output_dim"])
        self._options = kaldi_native_fbank.FbankOptions()
        self._options.frame_opts.dither = 0.0
        self._options.frame_opts.snip_edges = False
        self._options.frame_opts.samp_freq = SAMPLE_RATE
        self._options.mel_opts.num_bins = bands
        self._options.mel_opts.low_freq = _LOW_HZ
        self._options.mel_opts.high_freq = _HIGH_HZ
        # Which model made a vector: vectors of two models are never compared.
        self.identity = "onnx:" + _sha256(path)[:16]
        try:
            heard = self.embed(np.zeros(SAMPLE_RATE, dtype=np.float32))
        except Exception as exc:  # onnxruntime's, for a graph that takes other inputs
            raise UnusableSpeakerModel(
                f"{path}: does not run on filterbank frames ({exc})"
            ) from None
        if heard.shape != (self.dimensions,):
            raise UnusableSpeakerModel(f"{path}: gives {heard.size} outputs, not output_dim")

    def embed(self, audio: npt.NDArray[np.float32]) -> Embedding:
        """The unit-length embedding of `audio` (16 kHz mono, floats in [-1, 1])."""
        if audio.size < _MIN_SAMPLES:
            audio = np.pad(audio, (0, _MIN_SAMPLES - audio.size))
        fbank = kaldi_native_fbank.OnlineFbank(self._options)
        fbank.accept_waveform(SAMPLE_RATE, np.asarray(audio * self._scale, dtype=np.float32))
        fbank.input_finished()
        frames = np.stack([np.array(fbank.get_frame(i)) for i in range(fbank.num_frames_ready)])
        if self._mean_normalized:
            frames -= frames.mean(axis=0)
        (output,) = self._session.run(None, {self._input: frames[None]})
        vector = np.asarray(output, dtype=np.float32).reshape(-1)
        return np.asarray(vector / (np.linalg.norm(vector) + 1e-12), dtype=np.float32)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
