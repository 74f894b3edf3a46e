"""Voice cloning by timbre matching with the WORLD vocoder (`pyworld`).

A clone is a neural base voice converted toward a profile measured on the customer's sample.
The base is the candidate (Piper's joe, Kokoro's styles speaking English) that lands nearest
the sample by speaker embedding (`speaker_embedding`, a d-vector) once converted: WORLD moves
pitch and timbre, but not what it cannot see (voice quality, rhythm), so bases end apart.
WORLD splits speech into F0, a spectral envelope and aperiodicity; we move the F0
statistics to the sample's, warp the envelope's frequency axis (formant scale, i.e. vocal-tract
length) and equalize what is left of the long-term envelope difference (spectral tilt and
broad resonances), then resynthesize. Everything is CPU-only and offline.

The profile stores measurements of the sample and the base it chose, never anything relative
to the base voice, so a stored profile stays valid if the base voice changes: the warp factor
and equalizer are derived at conversion time from the sample's profile and the base voice's.

All functions are pure (no shared mutable state), hence safe from several worker threads;
`WorldCloner` guards its caches with a lock.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from voice_service.engines.protocols import EngineError, Pcm, TextToSpeech, UnusableSample
from voice_service.engines.speaker_embedding import SpeakerEncoder, cosine

with warnings.catch_warnings():
    # pyworld 0.3.5 imports pkg_resources only for its version string.
    warnings.simplefilter("ignore")
    import pyworld

Floats = npt.NDArray[np.float64]

# 2: the profile names the base voice it was made for. Version 1 (no base: Piper's joe, the
# only base then) is still read, so clones stored before keep speaking as they did.
PROFILE_VERSION: Final = 2

# Analysis runs at 16 kHz whatever the sample's rate: uploads arrive at 8-48 kHz and the
# profile must compare across them; 16 kHz keeps the band up to 8 kHz where timbre lives.
ANALYSIS_RATE: Final = 16_000
# Statistics settle well within 30 s of speech; harvest costs ~0.17 s per second of audio,
# so a one-minute upload would otherwise hold a worker for 10 s.
MAX_ANALYSIS_SECONDS: Final = 30.0
# 5 ms frames: WORLD's default. 10 ms saves ~30 % of the time but smears plosives audibly.
FRAME_PERIOD_MS: Final = 5.0
F0_FLOOR_HZ: Final = 50.0
F0_CEIL_HZ: Final = 600.0

# Long-term envelope bands: log-spaced centres (equal resolution per octave, like hearing).
BAND_COUNT: Final = 32
BAND_LOW_HZ: Final = 100.0
BAND_HIGH_HZ: Final = 7_600.0
BAND_CENTRES_HZ: Final = np.geomspace(BAND_LOW_HZ, BAND_HIGH_HZ, BAND_COUNT)
# Tilt and formant fit use the band with most of speech's energy and reliable envelopes.
FIT_LOW_HZ: Final = 200.0
FIT_HIGH_HZ: Final = 5_000.0

# Speech gates: a sample must hold at least this much voiced time, be louder than this,
# and its voiced frames must be periodic (noise gets sporadic harvest "voicing"). Measured
# median periodicity: Piper speech 0.54, espeak 0.6+, brown noise 0.14, white noise 0.01.
MIN_VOICED_SECONDS: Final = 0.5
MIN_RMS_DBFS: Final = -55.0
MIN_PERIODICITY: Final = 0.3
# Pitch statistics use only clearly periodic frames. On Piper's joe, harvest's median over all
# voiced frames of one text moved 110 -> 165 Hz (normalized) when the same audio was merely
# resampled; over frames with periodicity >= 0.8 it stayed within 101-102 Hz.
RELIABLE_PERIODICITY: Final = 0.8
MIN_RELIABLE_FRAMES: Final = 40  # 0.2 s
# A steady tone (hum, beep) is periodic but not speech: speech F0 moves.
MIN_LOG_F0_SPREAD: Final = 0.02

# Bounds on the conversion: beyond these the output stops being intelligible or natural.
WARP_RANGE: Final = (0.80, 1.25)
WARP_STEPS: Final = 91
F0_SPREAD_RATIO_RANGE: Final = (0.5, 2.0)
MAX_EQ_DB: Final = 12.0


class NoSpeechInSample(UnusableSample):
    """The voice sample holds no usable speech (silence, noise, or too little voicing)."""


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
    """

    f0_log_median: float
    f0_log_spread: float
    envelope_db: tuple[float, ...]
    tilt_db_per_octave: float
    voiced_seconds: float
    base_voice: str | None = None

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
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VoiceProfile:
        version = data.get("version")
        if version not in (1, PROFILE_VERSION):
            raise ValueError(f"unsupported voice profile version {version!r}")
        base_voice = data.get("base_voice") if version == PROFILE_VERSION else None
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
        )


@dataclass(frozen=True, slots=True)
class _World:
    """WORLD parameters of one signal, one row per frame."""

    f0: Floats
    envelope: Floats  # power spectral envelope, frames x (fft_size / 2 + 1)
    aperiodicity: Floats
    sample_rate: int


def analyse_sample(pcm: Pcm) -> VoiceProfile:
    """Measure a speaker's pitch and timbre; raise `NoSpeechInSample` when there is no speech."""
    return _analyse_speech(analysed_speech(pcm))


def analysed_speech(pcm: Pcm) -> Floats:
    """The part of `pcm` the analysis reads: at most 30 s of speech, 16 kHz, silence trimmed.
    Raises `NoSpeechInSample` when it is too short."""
    signal = _to_float(pcm)
    if signal.size < pcm.sample_rate // 2:
        raise NoSpeechInSample("the sample is shorter than half a second")
    signal = _resample(signal, pcm.sample_rate, ANALYSIS_RATE)
    return _trim_silence(signal, ANALYSIS_RATE)[: int(MAX_ANALYSIS_SECONDS * ANALYSIS_RATE)]


def _analyse_speech(signal: Floats) -> VoiceProfile:
    level = _rms_dbfs(signal)
    if level < MIN_RMS_DBFS:
        raise NoSpeechInSample(f"the sample is silent (level {level:.0f} dBFS)")
    world = _analyse(
        signal, ANALYSIS_RATE, f0_range=(F0_FLOOR_HZ, F0_CEIL_HZ), with_aperiodicity=False
    )
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


def convert(pcm: Pcm, conversion: Conversion) -> Pcm:
    """Resynthesize `pcm` (base voice speech) with the conversion applied; same rate, mono."""
    signal = _to_float(pcm)
    if signal.size == 0:
        return pcm
    f0_range = (conversion.base_f0_floor_hz, conversion.base_f0_ceil_hz)
    return resynthesize(analyse_base_speech(pcm, f0_range), conversion)


@dataclass(frozen=True, slots=True)
class BaseSpeech:
    """Base-voice speech split by WORLD: what `convert` spends most of its time on, and the
    same whatever the target, so speech converted toward many targets is analysed once."""

    world: _World
    samples: int
    rms: float


def analyse_base_speech(pcm: Pcm, f0_range: tuple[float, float]) -> BaseSpeech:
    """`pcm` (base-voice speech) analysed within the base's pitch range (`base_f0_range`)."""
    signal = _to_float(pcm)
    try:
        world = _analyse(signal, pcm.sample_rate, f0_range=f0_range, with_aperiodicity=True)
    except (RuntimeError, ValueError) as error:
        raise EngineError(f"WORLD analysis failed: {error}") from error
    return BaseSpeech(world, signal.size, _rms(signal))


def resynthesize(speech: BaseSpeech, conversion: Conversion) -> Pcm:
    """`speech` with the conversion applied; same rate and loudness, mono."""
    world, rate = speech.world, speech.world.sample_rate
    try:
        f0 = _convert_f0(world.f0, conversion)
        envelope = _warp_envelope(world.envelope, conversion.formant_scale)
        envelope = envelope * _eq_gain(conversion.eq_db, envelope.shape[1], rate)
        out = pyworld.synthesize(
            f0, envelope, world.aperiodicity, rate, frame_period=FRAME_PERIOD_MS
        )
    except (RuntimeError, ValueError) as error:
        raise EngineError(f"WORLD conversion failed: {error}") from error
    return Pcm(samples=_to_int16(out[: speech.samples], speech.rms), sample_rate=rate)


# A few sentences covering English vowels and voiced consonants, spoken once at start-up to
# measure the base voice. Per-utterance statistics of short requests would jitter (a question
# rises, a list falls), so conversions use this long-term profile.
BASE_CALIBRATION_TEXT: Final = (
    "The quick brown fox jumps over the lazy dog. Every morning, I walk along the river and "
    "watch the boats drift slowly past the old stone bridge. Would you like a cup of tea, or "
    "would you rather have some cold water? My neighbour's children were playing football "
    "in the garden until it began to rain."
)


# Spoken and analysed by WORLD once per base voice (kept at 16 kHz, all the embedding reads),
# then resynthesized toward every new sample to choose its base: one sentence, since each
# clone converts it once per base (figures: bench/engine_settings.md).
PROBE_TEXT: Final = "The quick brown fox jumps over the lazy dog."


@dataclass(frozen=True, slots=True)
class BaseVoice:
    """A voice clones can be converted from: `tts` speaks `key`."""

    key: str
    tts: TextToSpeech


def measure_base(base: BaseVoice) -> VoiceProfile:
    """The long-term profile of a base voice: `BASE_CALIBRATION_TEXT` spoken and analysed."""
    return analyse_sample(base.tts.synthesize(base.key, BASE_CALIBRATION_TEXT))


class WorldCloner:
    """`VoiceCloner`: the base voice that lands nearest the sample, converted toward it.

    The base is chosen after conversion, not before: each base's `PROBE_TEXT` is converted
    toward the sample and the one whose result is nearest the sample's d-vector wins. On the
    three real speakers of bench.clone_similarity, the base nearest *before* conversion was
    the male `jm_kumo` every time, and its clones gained +0.149 (Resemblyzer) / +0.030
    (d-vector) over Piper's joe unconverted, while converting joe itself gained +0.118 /
    +0.135: WORLD moves some voices much further than others. Chosen after conversion:
    +0.186 / +0.199 (ceiling, the speaker against himself: +0.367 / +0.435).

    The first of `bases` is the default: version-1 profiles (made before there was a choice)
    use it, and so does a clone whose base this node does not load (an operator who turned
    Kokoro off gets clones that still speak, in Piper's voice, rather than failing).

    Conversions need each base's long-term profile (`measure_base`: ~14 s of speech; 10 s of
    a loaded 2-core start for Piper alone, ~15 CPU-s per Kokoro style: all six took 138
    CPU-s, 3.6 min on this 2-core machine). Choosing a base needs them all, so measuring
    lazily would hold a node's first clone for minutes, and measuring at start would add
    them to every start: the profiles ship as data instead (`clone_base_profiles`, checked
    against fresh measurements by the tests), and only a base missing from `profiles` is
    measured, on first use; start-up now spends nothing on cloning (0.07 s, the encoder).
    The probes are synthesized on first use, under the lock.

    Thread-safe: the base engines are, profiles and probes are immutable once made, and
    their caches are only written under the lock.
    """

    sample_rate: Final = ANALYSIS_RATE  # samples are analysed at this rate whatever theirs

    def __init__(
        self,
        bases: Sequence[BaseVoice],
        encoder: SpeakerEncoder,
        profiles: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        if not bases:
            raise ValueError("a cloner needs at least one base voice")
        self._bases = {base.key: base for base in bases}
        self._default = bases[0]
        self._encoder = encoder
        self._profiles = {
            key: VoiceProfile.from_dict(profile)
            for key, profile in (profiles or {}).items()
            if key in self._bases
        }
        self._probes: dict[str, BaseSpeech] = {}
        self._lock = threading.Lock()

    @property
    def base_voice(self) -> str:
        """The default base voice (see the class)."""
        return self._default.key

    @property
    def base_voices(self) -> tuple[str, ...]:
        return tuple(self._bases)

    def profile(self, sample: Pcm) -> dict[str, Any]:
        speech = analysed_speech(sample)
        profile = _analyse_speech(speech)
        base = self.nearest_base(speech, profile)
        return dataclasses.replace(profile, base_voice=base).to_dict()

    def nearest_base(self, speech: Floats, target: VoiceProfile) -> str:
        """The base whose probe, converted toward `target`, sounds nearest `speech` (the
        sample at 16 kHz, as `analysed_speech` gives it)."""
        if len(self._bases) == 1:
            return self._default.key
        embedding = self._encoder.embed(speech.astype(np.float32))

        def similarity(key: str) -> float:
            conversion = Conversion.between(self.base_profile(key), target)
            converted = analysed_speech(resynthesize(self._probe(key), conversion))
            return cosine(embedding, self._encoder.embed(converted.astype(np.float32)))

        return max(self._bases, key=similarity)

    def speaker(self, profile: Mapping[str, Any]) -> Callable[[str], Pcm]:
        target = VoiceProfile.from_dict(profile)
        base = self._bases.get(target.base_voice or "", self._default)
        conversion = Conversion.between(self.base_profile(base.key), target)
        return lambda text: convert(base.tts.synthesize(base.key, text), conversion)

    def base_profile(self, key: str) -> VoiceProfile:
        """The long-term profile of the base `key`: shipped, or measured on first use."""
        with self._lock:
            if key not in self._profiles:
                self._profiles[key] = measure_base(self._bases[key])
            return self._profiles[key]

    def _probe(self, key: str) -> BaseSpeech:
        """The base's `PROBE_TEXT` at 16 kHz, analysed once: converting it toward each new
        sample then costs only WORLD's synthesis."""
        profile = self.base_profile(key)
        with self._lock:
            if key not in self._probes:
                speech = self._bases[key].tts.synthesize(key, PROBE_TEXT)
                signal = _resample(_to_float(speech), speech.sample_rate, ANALYSIS_RATE)
                probe = Pcm(_to_int16(signal, _rms(signal)), ANALYSIS_RATE)
                self._probes[key] = analyse_base_speech(probe, base_f0_range(profile))
            return self._probes[key]


def _analyse(
    signal: Floats, sample_rate: int, *, f0_range: tuple[float, float], with_aperiodicity: bool
) -> _World:
    # Harvest, not dio: dio+stonemask doubles F0 on ~25 % of Piper's voiced frames (measured
    # median 157 Hz vs harvest's 127 Hz), which would shift every clone's pitch.
    f0, times = pyworld.harvest(
        signal,
        sample_rate,
        f0_floor=f0_range[0],
        f0_ceil=f0_range[1],
        frame_period=FRAME_PERIOD_MS,
    )
    envelope = pyworld.cheaptrick(signal, f0, times, sample_rate)
    aperiodicity = (
        pyworld.d4c(signal, f0, times, sample_rate) if with_aperiodicity else np.empty((0, 0))
    )
    return _World(f0=f0, envelope=envelope, aperiodicity=aperiodicity, sample_rate=sample_rate)


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
    return np.asarray(bands - bands[_fit_mask()].mean(), dtype=np.float64)


def _fit_mask() -> npt.NDArray[np.bool_]:
    return (BAND_CENTRES_HZ >= FIT_LOW_HZ) & (BAND_CENTRES_HZ <= FIT_HIGH_HZ)


def _tilt(envelope_db: Floats) -> float:
    mask = _fit_mask()
    slope, _ = np.polyfit(np.log2(BAND_CENTRES_HZ[mask]), envelope_db[mask], 1)
    return float(slope)


def _warp_bands(envelope_db: Floats, scale: float) -> Floats:
    """The band envelope after moving every frequency f to f * scale."""
    log_centres = np.log(BAND_CENTRES_HZ)
    return np.interp(log_centres - math.log(scale), log_centres, envelope_db)


def _formant_scale(base_db: Floats, target_db: Floats) -> float:
    """Warp factor that best maps the base envelope's shape onto the target's.

    Tilt is fitted out at every candidate, so the factor follows resonance positions rather
    than a brighter or darker recording (which the equalizer handles).
    """
    mask = _fit_mask()
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


def _to_float(pcm: Pcm) -> Floats:
    if pcm.samples.ndim != 1:
        raise ValueError("PCM must be mono")
    return pcm.samples.astype(np.float64) / 32768.0


def _to_int16(signal: Floats, target_rms: float) -> npt.NDArray[np.int16]:
    """Match the input's loudness (the equalizer changes it), never clipping."""
    rms = _rms(signal)
    gain = target_rms / rms if rms > 0 else 0.0
    peak = float(np.max(np.abs(signal))) * gain if signal.size else 0.0
    if peak > 0.99:
        gain *= 0.99 / peak
    return np.round(signal * gain * 32767.0).astype(np.int16)


def _rms(signal: Floats) -> float:
    return float(np.sqrt(np.mean(signal**2))) if signal.size else 0.0


def _rms_dbfs(signal: Floats) -> float:
    return 20.0 * math.log10(max(_rms(signal), 1e-10))


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


def _resample(signal: Floats, rate: int, new_rate: int) -> Floats:
    """Band-limited resampling by FFT (exact for our purpose, and needs no extra package)."""
    if rate == new_rate or signal.size == 0:
        return signal
    length = max(1, round(signal.size * new_rate / rate))
    spectrum = np.fft.rfft(signal)
    kept = min(spectrum.size, length // 2 + 1)
    resized = np.zeros(length // 2 + 1, dtype=np.complex128)
    resized[:kept] = spectrum[:kept]
    return np.asarray(np.fft.irfft(resized, length) * (length / signal.size), dtype=np.float64)
