"""Base choice: the voices a clone can speak through, and which one it speaks through.

A clone is a neural base voice (Piper's joe, Kokoro's styles speaking English) converted toward
the sample's profile. WORLD moves pitch and timbre, but not what it cannot see (voice quality,
rhythm), so bases end apart: `WorldCloner` picks the one that lands nearest the sample by
speaker embedding (`speaker_embedding`, a d-vector) once converted. It lives here, as the
`VoiceCloner`, because choosing and measuring bases is most of what it does; measuring and
converting it leaves to `analysis` and `conversion`.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from voice_service.engines.protocols import Clone, Pcm, TextToSpeech, UnknownVoice
from voice_service.engines.speaker_embedding import (
    Embedding,
    SpeakerEncoder,
    cosine,
    resemblance,
)
from voice_service.engines.world import phones
from voice_service.engines.world.analysis import (
    ANALYSIS_RATE,
    FRAME_PERIOD_MS,
    analyse_sample,
    analysed_speech,
    profile_speech,
    sample_world,
)
from voice_service.engines.world.base_speech import SpokenText, text_id
from voice_service.engines.world.conversion import (
    BaseSpeech,
    Conversion,
    analyse_base_speech,
    base_f0_range,
    convert,
    resynthesize,
)
from voice_service.engines.world.pcm import resample, rms, to_float, to_int16
from voice_service.engines.world.profile import VoiceProfile
from voice_service.engines.world.timbre import Timbre, measure_timbre

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
# What a new clone says to be measured against its sample (`resemblance`): a sentence the
# choice of base never heard, so the choice does not flatter the measure. Spoken by each base
# once and kept analysed, as the probe is, so measuring a clone costs only WORLD's synthesis.
VERIFY_TEXT: Final = "Every morning, I walk along the river. Would you like a cup of tea?"
# Each base's sentences, shipped half analysed (`base_speech`).
CLONE_TEXTS: Final = (PROBE_TEXT, VERIFY_TEXT)


@dataclass(frozen=True, slots=True)
class BaseVoice:
    """A voice clones can be converted from: `tts` speaks `key`, and in each language of
    `languages` (an ISO 639-1 code, its own first) the key it maps to."""

    key: str
    tts: TextToSpeech
    languages: Mapping[str, str]

    @classmethod
    def of(cls, key: str, tts: TextToSpeech) -> BaseVoice:
        return cls(key, tts, tts.clone_base_languages(key))


def measure_base(base: BaseVoice) -> VoiceProfile:
    """The long-term profile of a base voice: `BASE_CALIBRATION_TEXT` spoken and analysed."""
    return analyse_sample(base.tts.synthesize(base.key, BASE_CALIBRATION_TEXT))


def spoken_for_analysis(base: BaseVoice, text: str) -> Pcm:
    """`text` in `base`'s voice at the analysis rate (all the embedding reads), as loud as
    it was said."""
    speech = base.tts.synthesize(base.key, text)
    signal = resample(to_float(speech), speech.sample_rate, ANALYSIS_RATE)
    return Pcm(to_int16(signal, rms(signal)), ANALYSIS_RATE)


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

    Conversions need each base's long-term profile (`measure_base`, over about 14 s of
    speech: minutes of CPU for all the bases, bench/engine_settings.md). Choosing a base
    needs them all, so measuring lazily would hold a node's first clone for minutes, and
    measuring at start would add them to every start: the profiles ship as data instead
    (`base_profiles`, checked against fresh measurements by the tests), and only a base
    missing from `profiles` is measured, on first use.
    The probe and the verifying sentence (`CLONE_TEXTS`) ship likewise, spoken and with
    their F0 (`base_speech`), since saying them in every base held a node's first clone for
    seconds; the rest of their analysis runs on first use, under the lock, and a sentence
    missing from `spoken` is synthesized then too.

    Thread-safe: the base engines are, profiles and probes are immutable once made, and
    their caches are only written under the lock.
    """

    sample_rate: Final = ANALYSIS_RATE  # samples are analysed at this rate whatever theirs

    def __init__(
        self,
        bases: Sequence[BaseVoice],
        encoder: SpeakerEncoder,
        profiles: Mapping[str, Mapping[str, Any]] | None = None,
        spoken: Mapping[tuple[str, str], SpokenText] | None = None,
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
        self._shipped_speech = spoken or {}  # by (base, base_speech.text_id)
        self._spoken_texts: dict[tuple[str, str], BaseSpeech] = {}
        self._lock = threading.Lock()

    @property
    def base_voice(self) -> str:
        """The default base voice (see the class)."""
        return self._default.key

    @property
    def base_voices(self) -> tuple[str, ...]:
        return tuple(self._bases)

    def clone(self, sample: Pcm) -> Clone:
        speech = analysed_speech(sample)
        world = sample_world(speech)
        measured = profile_speech(speech, world)
        embedding = self._encoder.embed(speech.astype(np.float32))
        base = self.nearest_base(embedding, measured)
        timbre = measure_timbre(world.f0, world.envelope, phones.labels(speech), FRAME_PERIOD_MS)
        target = dataclasses.replace(measured, base_voice=base, timbre=timbre.to_text())
        similarity = self._similarity(embedding, base, VERIFY_TEXT, target, timbre)
        return Clone(target.to_dict(), resemblance(similarity))

    def nearest_base(self, sample: Embedding, target: VoiceProfile) -> str:
        """The base whose probe, converted toward `target`, sounds nearest the sample (its
        d-vector, `sample`)."""
        if len(self._bases) == 1:
            return self._default.key
        return max(self._bases, key=lambda key: self._similarity(sample, key, PROBE_TEXT, target))

    def _similarity(
        self,
        sample: Embedding,
        key: str,
        text: str,
        target: VoiceProfile,
        timbre: Timbre | None = None,
    ) -> float:
        """How near the sample's d-vector `text` sounds, said by the base `key` and converted
        toward `target` (with the sample's `timbre` lent, where given)."""
        conversion = Conversion.between(self.base_profile(key), target)
        spoken = self._spoken(key, text, labelled=timbre is not None)
        converted = analysed_speech(resynthesize(spoken, conversion, timbre))
        return cosine(sample, self._encoder.embed(converted.astype(np.float32)))

    @property
    def speeds(self) -> tuple[float, float]:
        """The speeds every base reaches by itself (the conversion keeps the timing)."""
        engines = [base.tts.speeds for base in self._bases.values()]
        return max(low for low, _ in engines), min(high for _, high in engines)

    def languages(self, profile: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(self._base_of(VoiceProfile.from_dict(profile)).languages)

    def speaker(
        self, profile: Mapping[str, Any], speed: float = 1.0, language: str | None = None
    ) -> Callable[[str], Pcm]:
        """The conversion measured on the base's English speaks every language of the base:
        the voice is the same, so its long-term profile is too."""
        target = VoiceProfile.from_dict(profile)
        base = self._base_of(target)
        key = base.key if language is None else base.languages.get(language)
        if key is None:
            raise UnknownVoice(f"{base.key} in {language}")
        conversion = Conversion.between(self.base_profile(base.key), target)
        timbre = None if target.timbre is None else Timbre.from_text(target.timbre)
        return lambda text: convert(base.tts.synthesize(key, text, speed), conversion, timbre)

    def _base_of(self, target: VoiceProfile) -> BaseVoice:
        """The clone's base, or the default where this node does not load it (see the
        class)."""
        return self._bases.get(target.base_voice or "", self._default)

    def base_profile(self, key: str) -> VoiceProfile:
        """The long-term profile of the base `key`: shipped, or measured on first use."""
        with self._lock:
            if key not in self._profiles:
                self._profiles[key] = measure_base(self._bases[key])
            return self._profiles[key]

    def _spoken(self, key: str, text: str, *, labelled: bool = False) -> BaseSpeech:
        """`text` in the base `key`'s voice at 16 kHz, analysed once (the probe, the
        verifying sentence), with its phones once they are asked for: converting it toward
        each new sample then costs only WORLD's synthesis."""
        f0_range = base_f0_range(self.base_profile(key))
        with self._lock:
            known = self._spoken_texts.get((key, text))
            if known is None or (labelled and known.labels is None):
                shipped = self._shipped_speech.get((key, text_id(text)))
                self._spoken_texts[key, text] = (
                    analyse_base_speech(shipped.pcm, f0_range, shipped.f0, labelled=labelled)
                    if shipped
                    else analyse_base_speech(
                        spoken_for_analysis(self._bases[key], text), f0_range, labelled=labelled
                    )
                )
            return self._spoken_texts[key, text]
