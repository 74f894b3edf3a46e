"""OpenAI's `server_vad` turn detection, with the Silero VAD model faster-whisper ships.

Silero judges 32 ms windows (512 samples at 16 kHz, each seen with the 64 before it) and
carries its state from one to the next, so audio is judged as it arrives. Speech starts at
the first window at or above `threshold`; it stops once windows under `threshold - 0.15`
(Silero's own hysteresis) have lasted `silence_duration_ms`. A turn's audio begins
`prefix_padding_ms` before its speech started.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
import onnxruntime

RATE = 16_000  # what Silero (and Whisper) take
Floats = npt.NDArray[np.float32]

WINDOW = 512
_CONTEXT = 64
_HYSTERESIS = 0.15


@dataclass(frozen=True, slots=True)
class ServerVad:
    """OpenAI's `turn_detection` settings of type `server_vad`, with its defaults."""

    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500


@dataclass(frozen=True, slots=True)
class VadEvent:
    kind: Literal["started", "stopped"]
    sample: int  # from the start of the session's audio: where speech began, or stopped
    silent_from: int | None = None  # where the silence that stopped it began ("stopped")


@functools.cache
def _model() -> onnxruntime.InferenceSession:
    # The file inside faster-whisper's package, found without importing the package (and
    # CTranslate2 with it) on a node that does not transcribe itself.
    spec = importlib.util.find_spec("faster_whisper")
    assert spec is not None and spec.submodule_search_locations is not None
    path = Path(next(iter(spec.submodule_search_locations))) / "assets" / "silero_vad_v6.onnx"
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(
        str(path), sess_options=options, providers=["CPUExecutionProvider"]
    )


def load_vad() -> None:
    """Load the model now (at start, in a worker thread), not in a session's first second
    on the event loop."""
    _model()


def speech_seconds(audio: Floats) -> float:
    """How much of `audio` (16 kHz mono) Silero hears as speech: its windows at or above
    the default threshold, in seconds. Judged a few seconds at a time: the model's memory
    grows with the windows of one run."""
    detector = SpeechDetector(ServerVad())
    piece = 8 * RATE
    windows = 0
    for start in range(0, audio.size, piece):
        probabilities = detector.judge(audio[start : start + piece])
        windows += int(np.count_nonzero(probabilities >= detector.settings.threshold))
    return windows * WINDOW / RATE


class SpeechDetector:
    """One session's speech detection: audio in, speech started and stopped out."""

    def __init__(self, settings: ServerVad) -> None:
        self.settings = settings
        self._state = np.zeros((2, 1, 1, 128), dtype=np.float32)
        self._context = np.zeros(_CONTEXT, dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)
        self._judged = 0  # samples judged so far
        self.speaking = False
        self._silence = 0  # samples of silence since speech was last heard

    @property
    def judged(self) -> int:
        """Samples judged so far (those of whole windows)."""
        return self._judged

    @property
    def silent_from(self) -> int | None:
        """Where the silence that may stop the current speech began: None while not
        speaking, or when the last window judged was not silence."""
        return self._judged - self._silence if self.speaking and self._silence else None

    def judge(self, audio: Floats) -> Floats:
        """The speech probability of every whole window `audio` completes."""
        pending = np.concatenate([self._pending, audio])
        whole = pending.size - pending.size % WINDOW
        self._pending = pending[whole:]
        if whole == 0:
            return np.zeros(0, dtype=np.float32)
        windows = pending[:whole].reshape(-1, WINDOW)
        contexts = np.concatenate([self._context[None, :], windows[:-1, -_CONTEXT:]])
        self._context = windows[-1, -_CONTEXT:].copy()
        return self._probabilities(np.concatenate([contexts, windows], axis=1))

    def add(self, audio: Floats) -> list[VadEvent]:
        """Judge every whole window `audio` completes."""
        probabilities = self.judge(audio)
        events = []
        silence_needed = self.settings.silence_duration_ms * RATE // 1000
        for probability in probabilities:
            start = self._judged
            self._judged += WINDOW
            if probability >= self.settings.threshold:
                self._silence = 0
                if not self.speaking:
                    self.speaking = True
                    events.append(VadEvent("started", start))
            elif self.speaking and probability < self.settings.threshold - _HYSTERESIS:
                self._silence += WINDOW
                if self._silence >= silence_needed:
                    self.speaking = False
                    events.append(VadEvent("stopped", self._judged, self._judged - self._silence))
                    self._silence = 0
            elif self.speaking:
                self._silence = 0
        return events

    def _probabilities(self, batch: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        h, c = self._state[0], self._state[1]
        probabilities, h, c = _model().run(None, {"input": batch, "h": h, "c": c})
        self._state = np.stack([h, c])
        return np.asarray(probabilities, dtype=np.float32).reshape(-1)
