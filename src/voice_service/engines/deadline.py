"""Deadlines for inference, proportional to the audio an inference handles.

A model that misbehaves on some input (Whisper decoding NaN audio looped for a minute) must
not hold a worker for long: work runs in steps (a chunk of text, a 30 s window of audio), and
between steps the caller checks that it is still within its budget.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from voice_service.engines.protocols import EngineError


class InferenceTimeout(EngineError):
    """An inference ran past its deadline and was stopped."""


@dataclass(frozen=True, slots=True)
class InferenceBudget:
    """`base_seconds`, plus `per_audio_second` for every second of audio handled."""

    base_seconds: float
    per_audio_second: float

    def start(self) -> Deadline:
        return Deadline(self)


@dataclass(frozen=True, slots=True)
class Deadline:
    budget: InferenceBudget
    started: float = field(default_factory=time.monotonic)

    def check(self, audio_seconds: float) -> None:
        """Raise `InferenceTimeout` if more time has passed than `audio_seconds` allow."""
        allowed = self.budget.base_seconds + self.budget.per_audio_second * audio_seconds
        elapsed = time.monotonic() - self.started
        if elapsed > allowed:
            raise InferenceTimeout(
                f"stopped after {elapsed:.1f} s, past its {allowed:.1f} s budget "
                f"for {audio_seconds:.1f} s of audio"
            )
