"""The real recordings of Debian's `pocketsphinx-testdata` (`.ci/run` installs it), read
as Whisper hears them; nothing here loads an engine, so a bench that only streams them
(bench.gpu_live on a machine of its own) imports no more than it needs."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
import numpy.typing as npt

POCKETSPHINX_DATA = Path("/usr/share/pocketsphinx/test/data")
SAMPLE_RATE = 16_000


class SpeechDataMissingError(RuntimeError):
    """The real recordings are not installed."""


def read_recording(name: str, root: Path = POCKETSPHINX_DATA) -> npt.NDArray[np.float32]:
    """A `pocketsphinx-testdata` recording (16 kHz 16-bit mono, WAV or raw) as floats."""
    path = present(root / name)
    if path.suffix != ".wav":
        return to_float(np.frombuffer(path.read_bytes(), dtype="<i2"))
    with wave.open(str(path)) as wav:
        if (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) != (SAMPLE_RATE, 1, 2):
            raise ValueError(f"{path} is not 16 kHz 16-bit mono")
        return to_float(np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2"))


def present(path: Path) -> Path:
    """`path`, which must exist: a missing one says how to install the recordings."""
    if not path.exists():
        raise SpeechDataMissingError(
            f"{path} is missing: install the Debian package pocketsphinx-testdata "
            "(`apt-get install pocketsphinx-testdata`; .ci/run does it)"
        )
    return path


def to_float(pcm: npt.NDArray[np.int16]) -> npt.NDArray[np.float32]:
    return (pcm.astype(np.float32) / 32768.0).astype(np.float32)
