"""The voice profile: what is measured on a speaker's sample and stored with a clone.

A module of its own because it is a stored format: clones made long ago are read back through
`VoiceProfile.from_dict`, so its fields, its bands and its version change together and only
here; analysis fills it, conversion and base choice read it.

The profile stores measurements of the sample and the base it chose, never anything relative
to the base voice, so a stored profile stays valid if the base voice changes: the warp factor
and equalizer are derived at conversion time from the sample's profile and the base voice's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

# 2: the profile names the base voice it was made for. Version 1 (no base: Piper's joe, the
# only base then) is still read, so clones stored before keep speaking as they did. The
# optional `timbre` came within version 2: a node that predates it reads the profile still.
PROFILE_VERSION: Final = 2

# Long-term envelope bands: log-spaced centres (equal resolution per octave, like hearing).
BAND_COUNT: Final = 32
BAND_LOW_HZ: Final = 100.0
BAND_HIGH_HZ: Final = 7_600.0
BAND_CENTRES_HZ: Final = np.geomspace(BAND_LOW_HZ, BAND_HIGH_HZ, BAND_COUNT)
# Tilt and formant fit use the band with most of speech's energy and reliable envelopes.
FIT_LOW_HZ: Final = 200.0
FIT_HIGH_HZ: Final = 5_000.0


@dataclass(frozen=True, slots=True)
class VoiceProfile:
    """Timbre measurements of one speaker's sample, stored with a cloned voice.

    f0_log_median / f0_log_spread: median and robust spread (half the 16th-84th percentile
    range) of ln(F0 in Hz) over clearly periodic voiced frames.
    envelope_db: mean spectral envelope of voiced frames in dB at `BAND_CENTRES_HZ`,
    shifted to zero mean over the fit band (so recording level does not matter).
    tilt_db_per_octave: slope of that envelope over 200-5000 Hz.
    voiced_seconds: how much voiced speech the figures rest on.
    base_voice: the key of the base voice chosen for the speaker (None, as in version-1
    profiles: the cloner's default).
    timbre: the sample's voiced frames by phone (`timbre.Timbre.to_text`), which the clone's
    speech borrows from; None in profiles made before (they speak as they did), and ignored
    by nodes that predate it.
    """

    f0_log_median: float
    f0_log_spread: float
    envelope_db: tuple[float, ...]
    tilt_db_per_octave: float
    voiced_seconds: float
    base_voice: str | None = None
    timbre: str | None = None

    @property
    def f0_median_hz(self) -> float:
        return math.exp(self.f0_log_median)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": PROFILE_VERSION,
            "base_voice": self.base_voice,
            "f0_log_median": self.f0_log_median,
            "f0_log_spread": self.f0_log_spread,
            "envelope_db": list(self.envelope_db),
            "tilt_db_per_octave": self.tilt_db_per_octave,
            "voiced_seconds": self.voiced_seconds,
            **({} if self.timbre is None else {"timbre": self.timbre}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VoiceProfile:
        version = data.get("version")
        if version not in (1, PROFILE_VERSION):
            raise ValueError(f"unsupported voice profile version {version!r}")
        base_voice = data.get("base_voice") if version == PROFILE_VERSION else None
        timbre = data.get("timbre")
        if timbre is not None and not isinstance(timbre, str):
            raise ValueError("timbre must be text")
        envelope = tuple(float(value) for value in data["envelope_db"])
        if len(envelope) != BAND_COUNT:
            raise ValueError(f"envelope_db must have {BAND_COUNT} bands, not {len(envelope)}")
        return cls(
            f0_log_median=float(data["f0_log_median"]),
            f0_log_spread=float(data["f0_log_spread"]),
            envelope_db=envelope,
            tilt_db_per_octave=float(data["tilt_db_per_octave"]),
            voiced_seconds=float(data["voiced_seconds"]),
            base_voice=None if base_voice is None else str(base_voice),
            timbre=timbre,
        )


def fit_mask() -> npt.NDArray[np.bool_]:
    return (BAND_CENTRES_HZ >= FIT_LOW_HZ) & (BAND_CENTRES_HZ <= FIT_HIGH_HZ)
