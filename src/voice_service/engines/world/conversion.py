"""Conversion: base-voice speech moved toward a profile with WORLD.

WORLD splits speech into F0, a spectral envelope and aperiodicity; `Conversion.between` derives,
from the base voice's profile and the sample's, how to move the F0 statistics, how far to warp
the envelope's frequency axis (formant scale, i.e. vocal-tract length) and how to equalize what
is left of the long-term envelope difference (spectral tilt and broad resonances). `convert`
applies it and resynthesizes; `analyse_base_speech` and `resynthesize` are its two halves, for
speech that is converted toward many targets but should be analysed once.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass
from typing import Final

import numpy as np

from voice_service.engines.protocols import EngineError, Pcm
from voice_service.engines.world import phones
from voice_service.engines.world.analysis import (
    F0_CEIL_HZ,
    F0_FLOOR_HZ,
    FRAME_PERIOD_MS,
    WorldParams,
    analyse_world,
)
from voice_service.engines.world.pcm import Floats, resample, rms, to_float, to_int16
from voice_service.engines.world.phones import Labels
from voice_service.engines.world.profile import BAND_CENTRES_HZ, VoiceProfile, fit_mask
from voice_service.engines.world.timbre import Timbre, lent

with warnings.catch_warnings():
    # pyworld 0.3.5 imports pkg_resources only for its version string.
    warnings.simplefilter("ignore")
    import pyworld

# Bounds on the conversion: beyond these the output stops being intelligible or natural.
WARP_RANGE: Final = (0.80, 1.25)
WARP_STEPS: Final = 91
F0_SPREAD_RATIO_RANGE: Final = (0.5, 2.0)
MAX_EQ_DB: Final = 12.0


@dataclass(frozen=True, slots=True)
class Conversion:
    """The transformation from one profile to another, derived once per (base, target)."""

    f0_log_shift: float  # added to ln F0 after scaling around the base median
    f0_spread_ratio: float
    base_f0_log_median: float
    formant_scale: float  # > 1 moves formants up (shorter vocal tract)
    eq_db: tuple[float, ...]  # residual envelope correction at BAND_CENTRES_HZ
    # Harvest's search range for the base voice: its cost grows with the range, and the base
    # voice's pitch is known.
    base_f0_floor_hz: float
    base_f0_ceil_hz: float

    @classmethod
    def between(cls, base: VoiceProfile, target: VoiceProfile) -> Conversion:
        ratio = target.f0_log_spread / max(base.f0_log_spread, 1e-3)
        scale = _formant_scale(np.asarray(base.envelope_db), np.asarray(target.envelope_db))
        warped_base = _warp_bands(np.asarray(base.envelope_db), scale)
        # Smooth over neighbouring bands: single-band peaks are the sample's words and room,
        # not the speaker; clip so a bad recording cannot make the clone unintelligible.
        eq = np.clip(_smooth(np.asarray(target.envelope_db) - warped_base), -MAX_EQ_DB, MAX_EQ_DB)
        return cls(
            f0_log_shift=target.f0_log_median - base.f0_log_median,
            f0_spread_ratio=float(np.clip(ratio, *F0_SPREAD_RATIO_RANGE)),
            base_f0_log_median=base.f0_log_median,
            formant_scale=scale,
            eq_db=tuple(float(value) for value in eq),
            base_f0_floor_hz=base_f0_range(base)[0],
            base_f0_ceil_hz=base_f0_range(base)[1],
        )


def base_f0_range(base: VoiceProfile) -> tuple[float, float]:
    """Harvest's search range for a base voice's speech: around its known median."""
    return max(F0_FLOOR_HZ, base.f0_median_hz / 2.0), min(F0_CEIL_HZ, base.f0_median_hz * 2.5)


def convert(pcm: Pcm, conversion: Conversion, timbre: Timbre | None = None) -> Pcm:
    """Resynthesize `pcm` (base voice speech) with the conversion applied, and the
    sample's `timbre` lent where the clone has one; same rate, mono."""
    signal = to_float(pcm)
    if signal.size == 0:
        return pcm
    f0_range = (conversion.base_f0_floor_hz, conversion.base_f0_ceil_hz)
    speech = analyse_base_speech(pcm, f0_range, labelled=timbre is not None)
    converted = resynthesize(speech, conversion, timbre)
    return dataclasses.replace(converted, word_times=pcm.word_times)  # same timing


@dataclass(frozen=True, slots=True)
class BaseSpeech:
    """Base-voice speech split by WORLD: what `convert` spends most of its time on, and the
    same whatever the target, so speech converted toward many targets is analysed once."""

    world: WorldParams
    samples: int
    rms: float
    labels: Labels | None = None  # its phones (`phones.labels`), where a timbre is lent


def analyse_base_speech(
    pcm: Pcm, f0_range: tuple[float, float], f0: Floats | None = None, *, labelled: bool = False
) -> BaseSpeech:
    """`pcm` (base-voice speech) analysed within the base's pitch range (`base_f0_range`), or
    with harvest's `f0` of it where that was kept; its phones heard too if `labelled`."""
    signal = to_float(pcm)
    try:
        world = analyse_world(
            signal, pcm.sample_rate, f0_range=f0_range, with_aperiodicity=True, f0=f0
        )
    except (RuntimeError, ValueError) as error:
        raise EngineError(f"WORLD analysis failed: {error}") from error
    heard = phones.labels(resample(signal, pcm.sample_rate, phones.RATE)) if labelled else None
    return BaseSpeech(world, signal.size, rms(signal), heard)


def resynthesize(speech: BaseSpeech, conversion: Conversion, timbre: Timbre | None = None) -> Pcm:
    """`speech` with the conversion applied, and `timbre` lent where given (`speech` must be
    labelled then); same rate and loudness, mono."""
    world, rate = speech.world, speech.world.sample_rate
    try:
        f0 = _convert_f0(world.f0, conversion)
        envelope = _warp_envelope(world.envelope, conversion.formant_scale)
        envelope = envelope * _eq_gain(conversion.eq_db, envelope.shape[1], rate)
        if timbre is not None:
            assert speech.labels is not None, "timbre is lent by phone"
            envelope = lent(envelope, world.f0, speech.labels, rate, FRAME_PERIOD_MS, timbre)
        out = pyworld.synthesize(
            f0, envelope, world.aperiodicity, rate, frame_period=FRAME_PERIOD_MS
        )
    except (RuntimeError, ValueError) as error:
        raise EngineError(f"WORLD conversion failed: {error}") from error
    return Pcm(samples=to_int16(out[: speech.samples], speech.rms), sample_rate=rate)


def _warp_bands(envelope_db: Floats, scale: float) -> Floats:
    """The band envelope after moving every frequency f to f * scale."""
    log_centres = np.log(BAND_CENTRES_HZ)
    return np.interp(log_centres - math.log(scale), log_centres, envelope_db)


def _formant_scale(base_db: Floats, target_db: Floats) -> float:
    """Warp factor that best maps the base envelope's shape onto the target's.

    Tilt is fitted out at every candidate, so the factor follows resonance positions rather
    than a brighter or darker recording (which the equalizer handles).
    """
    mask = fit_mask()
    octaves = np.log2(BAND_CENTRES_HZ[mask])
    design = np.column_stack([octaves, np.ones_like(octaves)])
    best_scale, best_error = 1.0, math.inf
    for scale in np.geomspace(*WARP_RANGE, WARP_STEPS):
        difference = target_db[mask] - _warp_bands(base_db, float(scale))[mask]
        _, residual, _, _ = np.linalg.lstsq(design, difference, rcond=None)
        error = float(residual[0]) if residual.size else 0.0
        if error < best_error:
            best_scale, best_error = float(scale), error
    return best_scale


def _smooth(values: Floats) -> Floats:
    kernel = np.array([0.25, 0.5, 0.25])
    padded = np.concatenate([values[:1], values, values[-1:]])
    return np.convolve(padded, kernel, mode="valid")


def _convert_f0(f0: Floats, conversion: Conversion) -> Floats:
    voiced = f0 > 0
    if not voiced.any():
        return f0
    log_f0 = np.log(f0[voiced])
    # Centre on this utterance's own median: its contour is stretched around it and the
    # median lands exactly on the target's. Centring on the calibration profile instead
    # (measured on other text, other frames, another rate) overshot clones' pitch by 15-60 %,
    # the spread ratio amplifying the offset.
    centre = float(np.median(log_f0))
    target = conversion.base_f0_log_median + conversion.f0_log_shift
    out = np.zeros_like(f0)
    out[voiced] = np.exp(target + (log_f0 - centre) * conversion.f0_spread_ratio)
    return out


def _warp_envelope(envelope: Floats, scale: float) -> Floats:
    """Move formants by `scale`: the output at bin k is the input at bin k / scale."""
    if abs(scale - 1.0) < 1e-3:
        return envelope
    bins = envelope.shape[1]
    source = np.clip(np.arange(bins) / scale, 0.0, bins - 1.0)
    low = np.floor(source).astype(np.intp)
    high = np.minimum(low + 1, bins - 1)
    weight = source - low
    # Interpolate in the log domain: linear power interpolation would fill valleys.
    log_envelope = np.log(envelope + 1e-16)
    warped = log_envelope[:, low] * (1.0 - weight) + log_envelope[:, high] * weight
    return np.ascontiguousarray(np.exp(warped), dtype=np.float64)  # WORLD's C needs contiguous


def _eq_gain(eq_db: tuple[float, ...], bins: int, sample_rate: int) -> Floats:
    """Power gain per envelope bin; constant beyond the outermost bands."""
    frequencies = np.linspace(0.0, sample_rate / 2.0, bins)
    log_f = np.log(np.maximum(frequencies, 1.0))
    gain_db = np.interp(log_f, np.log(BAND_CENTRES_HZ), np.asarray(eq_db))
    return np.asarray(10.0 ** (gain_db / 10.0), dtype=np.float64)
