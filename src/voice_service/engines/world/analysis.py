"""Analysis: measuring a speaker's sample into a `VoiceProfile` with WORLD.

Pitch statistics over clearly periodic frames, the long-term spectral envelope in bands and its
tilt, and the gates that turn away samples without speech (`NoSpeechInSample`). WORLD's own
analysis (`analyse_world`: harvest, CheapTrick, D4C) lives here once, with its frame period and
pitch range, because the conversion splits base-voice speech with the same call.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from voice_service.engines.protocols import Pcm, UnusableSample
from voice_service.engines.world.pcm import Floats, resample, rms, to_float
from voice_service.engines.world.profile import BAND_CENTRES_HZ, VoiceProfile, fit_mask

with warnings.catch_warnings():
    # pyworld 0.3.5 imports pkg_resources only for its version string.
    warnings.simplefilter("ignore")
    import pyworld

# Analysis runs at 16 kHz whatever the sample's rate: uploads arrive at 8-48 kHz and the
# profile must compare across them; 16 kHz keeps the band up to 8 kHz where timbre lives.
ANALYSIS_RATE: Final = 16_000
# Statistics settle well within 30 s of speech, and harvest's cost grows with the audio: a
# long upload would otherwise hold a worker for its whole length (bench/engine_settings.md).
MAX_ANALYSIS_SECONDS: Final = 30.0
# 5 ms frames: WORLD's default. 10 ms saves time but smears plosives audibly.
FRAME_PERIOD_MS: Final = 5.0
F0_FLOOR_HZ: Final = 50.0
F0_CEIL_HZ: Final = 600.0

# Speech gates: a sample must hold at least this much voiced time, be louder than this,
# and its voiced frames must be periodic (noise gets sporadic harvest "voicing"). Measured
# median periodicity: Piper speech 0.54, espeak 0.6+, speech off a noisy radio channel
# (codec2's ve9qrp) 0.31, brown noise 0.14, white noise 0.01. The service asks Silero VAD
# first (`cloning.service`), so this bar need only keep noise out, not judge recordings.
MIN_VOICED_SECONDS: Final = 0.5
MIN_RMS_DBFS: Final = -55.0
MIN_PERIODICITY: Final = 0.2
# Pitch statistics use only clearly periodic frames. On Piper's joe, harvest's median over all
# voiced frames of one text moved 110 -> 165 Hz (normalized) when the same audio was merely
# resampled; over frames with periodicity >= 0.8 it stayed within 101-102 Hz.
RELIABLE_PERIODICITY: Final = 0.8
MIN_RELIABLE_FRAMES: Final = 40  # 0.2 s
# A steady tone (hum, beep) is periodic but not speech: speech F0 moves.
MIN_LOG_F0_SPREAD: Final = 0.02


class NoSpeechInSample(UnusableSample):
    """The voice sample holds no usable speech (silence, noise, or too little voicing)."""


@dataclass(frozen=True, slots=True)
class WorldParams:
    """WORLD parameters of one signal, one row per frame."""

    f0: Floats
    envelope: Floats  # power spectral envelope, frames x (fft_size / 2 + 1)
    aperiodicity: Floats
    sample_rate: int


def analyse_sample(pcm: Pcm) -> VoiceProfile:
    """Measure a speaker's pitch and timbre; raise `NoSpeechInSample` when there is no speech."""
    speech = analysed_speech(pcm)
    return profile_speech(speech, sample_world(speech))


def analysed_speech(pcm: Pcm) -> Floats:
    """The part of `pcm` the analysis reads: at most 30 s of speech, 16 kHz, silence trimmed.
    Raises `NoSpeechInSample` when it is too short."""
    signal = to_float(pcm)
    if signal.size < pcm.sample_rate // 2:
        raise NoSpeechInSample("the sample is shorter than half a second")
    signal = resample(signal, pcm.sample_rate, ANALYSIS_RATE)
    return _trim_silence(signal, ANALYSIS_RATE)[: int(MAX_ANALYSIS_SECONDS * ANALYSIS_RATE)]


def sample_world(signal: Floats) -> WorldParams:
    """WORLD's analysis of a sample's speech (`analysed_speech`), its pitch searched over
    every voice's range; raises `NoSpeechInSample` when it is silent."""
    level = _rms_dbfs(signal)
    if level < MIN_RMS_DBFS:
        raise NoSpeechInSample(f"the sample is silent (level {level:.0f} dBFS)")
    return analyse_world(
        signal, ANALYSIS_RATE, f0_range=(F0_FLOOR_HZ, F0_CEIL_HZ), with_aperiodicity=False
    )


def profile_speech(signal: Floats, world: WorldParams) -> VoiceProfile:
    """The profile of a sample's speech and its `sample_world`; raises `NoSpeechInSample`
    unless it holds speech."""
    voiced = world.f0 > 0
    reliable = _check_speech(world.f0, _periodicity(signal, world.f0))
    log_f0 = np.log(world.f0[reliable])
    low, median, high = np.percentile(log_f0, [16.0, 50.0, 84.0])
    envelope_db = _band_envelope_db(world.envelope[voiced], ANALYSIS_RATE)
    return VoiceProfile(
        f0_log_median=float(median),
        f0_log_spread=float((high - low) / 2.0),
        envelope_db=tuple(float(value) for value in envelope_db),
        tilt_db_per_octave=_tilt(envelope_db),
        voiced_seconds=round(float(voiced.sum()) * FRAME_PERIOD_MS / 1000.0, 3),
    )


def analyse_world(
    signal: Floats,
    sample_rate: int,
    *,
    f0_range: tuple[float, float],
    with_aperiodicity: bool,
    f0: Floats | None = None,
) -> WorldParams:
    """WORLD's analysis of `signal`; `f0`, when given, is harvest's of it, kept from before."""
    if f0 is None:
        # Harvest, not dio: dio+stonemask doubles F0 on ~25 % of Piper's voiced frames
        # (measured median 157 Hz vs harvest's 127 Hz), which would shift every clone's pitch.
        f0, times = pyworld.harvest(
            signal,
            sample_rate,
            f0_floor=f0_range[0],
            f0_ceil=f0_range[1],
            frame_period=FRAME_PERIOD_MS,
        )
    else:
        times = np.arange(f0.size) * (FRAME_PERIOD_MS / 1000.0)  # harvest's frame times
    envelope = pyworld.cheaptrick(signal, f0, times, sample_rate)
    aperiodicity = (
        pyworld.d4c(signal, f0, times, sample_rate) if with_aperiodicity else np.empty((0, 0))
    )
    return WorldParams(f0=f0, envelope=envelope, aperiodicity=aperiodicity, sample_rate=sample_rate)


def _check_speech(f0: Floats, periodicity: Floats) -> npt.NDArray[np.bool_]:
    """Raise unless the sample holds speech; return the frames reliable enough for pitch."""
    voiced = f0 > 0
    voiced_seconds = float(voiced.sum()) * FRAME_PERIOD_MS / 1000.0
    if voiced_seconds < MIN_VOICED_SECONDS:
        raise NoSpeechInSample(
            f"the sample holds {voiced_seconds:.1f} s of voiced speech; "
            f"at least {MIN_VOICED_SECONDS:.1f} s is needed"
        )
    if float(np.median(periodicity[voiced])) < MIN_PERIODICITY:
        raise NoSpeechInSample("the sample sounds like noise, not speech (no clear pitch)")
    reliable = voiced & (periodicity >= RELIABLE_PERIODICITY)
    if reliable.sum() < MIN_RELIABLE_FRAMES:
        raise NoSpeechInSample("the sample holds too little clearly voiced speech")
    if float(np.std(np.log(f0[reliable]))) < MIN_LOG_F0_SPREAD:
        raise NoSpeechInSample("the sample is a steady tone, not speech (its pitch never moves)")
    return reliable


def _periodicity(signal: Floats, f0: Floats) -> Floats:
    """Normalized autocorrelation one pitch period apart, per voiced frame (0 elsewhere).

    Harvest labels some frames of plain noise voiced, and on creaky or breathy frames it
    jumps between octaves; real, clean voicing repeats itself one period later (~0.8-0.95).
    """
    hop = int(ANALYSIS_RATE * FRAME_PERIOD_MS / 1000.0)
    scores = np.zeros_like(f0)
    for frame in np.flatnonzero(f0 > 0):
        lag = round(float(ANALYSIS_RATE / f0[frame]))
        start = frame * hop - lag
        stop = frame * hop + 2 * lag
        if start < 0 or stop + lag > signal.size:
            continue
        first, second = signal[start:stop], signal[start + lag : stop + lag]
        norm = math.sqrt(float(first @ first) * float(second @ second))
        if norm > 0:
            scores[frame] = float(first @ second) / norm
    return scores


def _band_envelope_db(envelope: Floats, sample_rate: int) -> Floats:
    """Mean log envelope at the band centres, level-normalized over the fit band."""
    bins = np.linspace(0.0, sample_rate / 2.0, envelope.shape[1])
    mean_db = np.mean(10.0 * np.log10(envelope + 1e-16), axis=0)
    # Average each band over +-1/4 octave rather than reading one bin: smoother, and the
    # same measure whatever the FFT size.
    edges_low, edges_high = BAND_CENTRES_HZ * 2**-0.25, BAND_CENTRES_HZ * 2**0.25
    bands = np.array(
        [
            mean_db[(bins >= low) & (bins <= high)].mean()
            for low, high in zip(edges_low, edges_high, strict=True)
        ]
    )
    return np.asarray(bands - bands[fit_mask()].mean(), dtype=np.float64)


def _tilt(envelope_db: Floats) -> float:
    mask = fit_mask()
    slope, _ = np.polyfit(np.log2(BAND_CENTRES_HZ[mask]), envelope_db[mask], 1)
    return float(slope)


def _rms_dbfs(signal: Floats) -> float:
    return 20.0 * math.log10(max(rms(signal), 1e-10))


def _trim_silence(signal: Floats, sample_rate: int) -> Floats:
    """Drop leading and trailing stretches 40 dB below the loudest 20 ms window."""
    window = sample_rate // 50
    count = signal.size // window
    if count == 0:
        return signal
    energy = np.mean(signal[: count * window].reshape(count, window) ** 2, axis=1)
    active = np.flatnonzero(energy > energy.max() * 1e-4)
    if active.size == 0:
        return signal[:0]
    return signal[active[0] * window : (active[-1] + 1) * window]
