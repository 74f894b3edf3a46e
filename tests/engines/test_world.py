"""WORLD timbre cloning: profile analysis, speech gates and conversion, on real speech.

Pitch-shifted samples are Piper speech relabelled with a higher or lower sample rate (a tape
played faster or slower): pitch and formants move by exactly that factor, which gives the
analysis a known answer.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import pyworld

from tests.helpers.speakers import READER, voice_clips
from tests.helpers.speech_clips import ENGLISH_TEXTS, english_speech, espeak_speech, silence, tone
from voice_service.engines.catalog import CLONE_BASE_VOICE
from voice_service.engines.kokoro import ALLOWED, KokoroEngine, clone_base_key
from voice_service.engines.kokoro import SAMPLE_RATE as KOKORO_RATE
from voice_service.engines.protocols import Pcm
from voice_service.engines.world import (
    BaseVoice,
    Conversion,
    NoSpeechInSample,
    VoiceProfile,
    WorldCloner,
    analyse_sample,
    convert,
    measure_base,
)
from voice_service.engines.world.analysis import ANALYSIS_RATE
from voice_service.engines.world.base_profiles import PROFILES
from voice_service.engines.world.base_speech import shipped, text_id
from voice_service.engines.world.bases import CLONE_TEXTS
from voice_service.engines.world.conversion import analyse_base_speech, base_f0_range
from voice_service.inference.engines import Engines, load_cloner

PIPER_RATE = 22050


def _buzz(seconds: float, hz: float, rate: int = 16000) -> Pcm:
    """A steady harmonic tone: periodic like a vowel, but its pitch never moves."""
    t = np.arange(int(seconds * rate)) / rate
    wave = sum(np.sin(2 * np.pi * hz * k * t) / k for k in range(1, 20))
    return Pcm((0.2 * 32767 * wave).astype(np.int16), rate)


def _f0(pcm: Pcm, floor: float = 50.0, ceil: float = 600.0) -> npt.NDArray[np.float64]:
    signal = pcm.samples.astype(np.float64) / 32768.0
    f0, _ = pyworld.harvest(signal, pcm.sample_rate, f0_floor=floor, f0_ceil=ceil)
    return np.asarray(f0, dtype=np.float64)


def _retuned(pcm: Pcm, factor: float) -> Pcm:
    return Pcm(samples=pcm.samples, sample_rate=round(pcm.sample_rate * factor))


@pytest.fixture(scope="module")
def base_speech() -> Pcm:
    # Two sentences (~7 s): one sentence's pitch median rests on too few clean frames.
    parts = [english_speech(text).samples for text in ENGLISH_TEXTS[1:3]]
    return Pcm(samples=np.concatenate(parts), sample_rate=22050)


@pytest.fixture(scope="module")
def base_profile() -> VoiceProfile:
    parts = [english_speech(text).samples for text in ENGLISH_TEXTS]
    return analyse_sample(Pcm(samples=np.concatenate(parts), sample_rate=22050))


@pytest.fixture(scope="module")
def high_profile(base_speech: Pcm) -> VoiceProfile:
    return analyse_sample(_retuned(base_speech, 1.3))


@pytest.fixture(scope="module")
def converted(base_speech: Pcm, base_profile: VoiceProfile, high_profile: VoiceProfile) -> Pcm:
    return convert(base_speech, Conversion.between(base_profile, high_profile))


def test_profile_round_trips_through_json(base_profile: VoiceProfile) -> None:
    stored = json.loads(json.dumps(base_profile.to_dict()))

    assert VoiceProfile.from_dict(stored) == base_profile
    assert stored["version"] == 2


def test_profile_of_unknown_version_is_rejected(base_profile: VoiceProfile) -> None:
    with pytest.raises(ValueError, match="version"):
        VoiceProfile.from_dict({**base_profile.to_dict(), "version": 99})


def test_pitch_statistics_follow_the_speaker() -> None:
    # espeak-ng's clean, steady voicing: Piper's joe is creaky enough that the median of one
    # or two sentences wobbles by ~10 % when the audio is merely resampled.
    speech = espeak_speech(" ".join(ENGLISH_TEXTS[:2]), "en-us")
    normal = analyse_sample(speech)
    higher = analyse_sample(_retuned(speech, 1.3))
    lower = analyse_sample(_retuned(speech, 0.8))

    assert 70 < normal.f0_median_hz < 200  # espeak's default English voice is male
    assert higher.f0_median_hz == pytest.approx(normal.f0_median_hz * 1.3, rel=0.1)
    assert lower.f0_median_hz == pytest.approx(normal.f0_median_hz * 0.8, rel=0.1)


def test_formant_scale_is_recovered(base_profile: VoiceProfile, high_profile: VoiceProfile) -> None:
    conversion = Conversion.between(base_profile, high_profile)

    # 1.3 lies beyond the warp's upper bound (1.25), so the bound it must reach.
    assert conversion.formant_scale == pytest.approx(1.25, abs=0.03)
    assert conversion.f0_log_shift == pytest.approx(math.log(1.3), abs=0.1)


def test_conversion_moves_pitch_toward_the_target(
    base_speech: Pcm, base_profile: VoiceProfile, high_profile: VoiceProfile, converted: Pcm
) -> None:
    # Frame by frame on the same words, so frame selection cannot bias the figures: each
    # frame's pitch must land where the profile mapping sends it.
    conversion = Conversion.between(base_profile, high_profile)
    # The base speech is read with the conversion's own search range, as it reads it.
    before = _f0(base_speech, conversion.base_f0_floor_hz, conversion.base_f0_ceil_hz)
    after = _f0(converted)
    both = (before > 0) & (after > 0)
    # The contour is stretched around the utterance's own median, which lands on the target.
    centre = float(np.median(np.log(before[before > 0])))
    target = conversion.base_f0_log_median + conversion.f0_log_shift
    mapped = np.exp(target + (np.log(before[both]) - centre) * conversion.f0_spread_ratio)

    assert high_profile.f0_median_hz > base_profile.f0_median_hz * 1.15
    assert float(np.median(after[both] / mapped)) == pytest.approx(1.0, abs=0.05)


def test_converted_audio_is_same_rate_mono_int16(base_speech: Pcm, converted: Pcm) -> None:
    assert converted.sample_rate == base_speech.sample_rate
    assert converted.samples.dtype == np.int16
    assert converted.samples.ndim == 1
    assert converted.duration_seconds == pytest.approx(base_speech.duration_seconds, abs=0.02)
    assert np.abs(converted.samples).max() > 3000  # audible, not silence


def test_concurrent_conversions_match_serial_ones(
    base_speech: Pcm, base_profile: VoiceProfile, high_profile: VoiceProfile, converted: Pcm
) -> None:
    short = Pcm(samples=base_speech.samples[: base_speech.sample_rate], sample_rate=22050)
    conversion = Conversion.between(base_profile, high_profile)
    expected = convert(short, conversion).samples
    results: list[Pcm] = []
    threads = [
        threading.Thread(target=lambda: results.append(convert(short, conversion)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(results) == 2
    assert all(np.array_equal(result.samples, expected) for result in results)


@pytest.mark.parametrize(
    ("sample", "message"),
    [
        (silence(3.0), "silent"),
        (_buzz(3.0, hz=150.0), "steady tone"),
        (tone(3.0, hz=440.0), "voiced"),
        (Pcm(np.zeros(100, dtype=np.int16), 16000), "shorter"),
    ],
    ids=["silence", "buzz", "sine", "too-short"],
)
def test_sample_without_speech_is_rejected(sample: Pcm, message: str) -> None:
    with pytest.raises(NoSpeechInSample, match=message):
        analyse_sample(sample)


def test_noise_is_rejected() -> None:
    noise = np.random.default_rng(7).normal(0.0, 3000.0, 16000 * 3)
    with pytest.raises(NoSpeechInSample):
        analyse_sample(Pcm(np.clip(noise, -32768, 32767).astype(np.int16), 16000))


@pytest.fixture(scope="module")
def cloner(engines: Engines) -> WorldCloner:
    assert isinstance(engines.cloner, WorldCloner)
    return engines.cloner


def test_clone_bases_are_piper_then_kokoros_english(cloner: WorldCloner, engines: Engines) -> None:
    kokoro = engines.speakers["kokoro"]
    assert isinstance(kokoro, KokoroEngine)

    assert cloner.base_voice == CLONE_BASE_VOICE
    assert cloner.base_voices == (CLONE_BASE_VOICE, *kokoro.clone_bases())
    assert len(cloner.base_voices) > 1
    # Only the English voices Kokoro offers are clone bases in the catalogue too.
    offered = {voice.key for voice in engines.catalogue()} & set(kokoro.clone_bases())
    assert offered == {f"kokoro:{style}:en" for style in ALLOWED["en"]}


@pytest.mark.parametrize("base", ["piper", "kokoro"])
def test_a_sample_spoken_by_a_candidate_base_picks_it(
    cloner: WorldCloner, engines: Engines, base: str
) -> None:
    key = CLONE_BASE_VOICE if base == "piper" else clone_base_key("jf_nezumi")
    # Other words than the calibration's: the choice must follow the voice, not the text.
    sample = engines.speakers[base].synthesize(key, " ".join(ENGLISH_TEXTS[1:3]))

    assert cloner.clone(sample).profile["base_voice"] == key


def test_a_version_1_profile_speaks_with_piper(
    cloner: WorldCloner, base_profile: VoiceProfile
) -> None:
    stored = {**base_profile.to_dict(), "version": 1}
    del stored["base_voice"]

    speech = cloner.speaker(stored)("Hello there.")
    assert speech.sample_rate == PIPER_RATE
    assert np.abs(speech.samples).max() > 3000


def test_the_stored_base_speaks(cloner: WorldCloner, base_profile: VoiceProfile) -> None:
    kokoro_base = clone_base_key("jf_nezumi")
    stored = {**base_profile.to_dict(), "base_voice": kokoro_base}

    assert cloner.speaker(stored)("Hello there.").sample_rate == KOKORO_RATE


def test_a_base_whose_engine_is_off_falls_back_to_piper(
    engines: Engines, base_profile: VoiceProfile
) -> None:
    without_kokoro = load_cloner({"piper": engines.speakers["piper"]})
    assert without_kokoro is not None
    stored = {**base_profile.to_dict(), "base_voice": clone_base_key("jm_kumo")}

    assert without_kokoro.base_voices == (CLONE_BASE_VOICE,)
    assert without_kokoro.speaker(stored)("Hello there.").sample_rate == PIPER_RATE


def test_no_piper_no_cloner(engines: Engines) -> None:
    assert load_cloner({"kokoro": engines.speakers["kokoro"]}) is None


def test_every_base_has_a_shipped_profile(cloner: WorldCloner) -> None:
    assert set(PROFILES) == set(cloner.base_voices)


# Neither base samples noise (Piper's Joe: `piper.PACKAGED_SYNTHESIS`), so a measurement
# repeats within a machine, but differs between machines of one kind (their numeric kernels):
# Kokoro's five styles measured on two machines differed by up to 0.006 in log F0 and 0.4 dB
# on average in the bands.
@pytest.mark.parametrize(
    ("base", "f0_tolerance", "band_tolerance"),
    [(CLONE_BASE_VOICE, 0.012, 0.8), (clone_base_key("jf_nezumi"), 0.012, 0.8)],
    ids=["piper", "kokoro"],
)
def test_shipped_base_profiles_match_fresh_measurements(
    engines: Engines, base: str, f0_tolerance: float, band_tolerance: float
) -> None:
    shipped = VoiceProfile.from_dict(PROFILES[base])
    fresh = measure_base(BaseVoice.of(base, engines.speakers[base.split(":")[0]]))

    assert fresh.f0_log_median == pytest.approx(shipped.f0_log_median, abs=f0_tolerance)
    assert fresh.f0_log_spread == pytest.approx(shipped.f0_log_spread, abs=f0_tolerance)
    differences = np.abs(np.subtract(fresh.envelope_db, shipped.envelope_db))
    assert float(np.mean(differences)) < band_tolerance


def test_every_base_ships_its_sentences_spoken(cloner: WorldCloner) -> None:
    """For the texts as they are now: a changed text or a new base needs
    `python -m bench.clone_base_profiles`."""
    assert set(shipped()) == {
        (key, text_id(text)) for key in cloner.base_voices for text in CLONE_TEXTS
    }


@pytest.mark.parametrize("base", [CLONE_BASE_VOICE, clone_base_key("jf_nezumi")])
@pytest.mark.parametrize("text", CLONE_TEXTS)
def test_a_shipped_sentence_analyses_as_its_speech_would(base: str, text: str) -> None:
    spoken = shipped()[base, text_id(text)]
    f0_range = base_f0_range(VoiceProfile.from_dict(PROFILES[base]))
    kept = analyse_base_speech(spoken.pcm, f0_range, spoken.f0).world
    fresh = analyse_base_speech(spoken.pcm, f0_range).world

    np.testing.assert_allclose(kept.f0, fresh.f0)
    np.testing.assert_allclose(kept.envelope, fresh.envelope)
    np.testing.assert_allclose(kept.aperiodicity, fresh.aperiodicity)


def test_a_nodes_first_clone_synthesizes_nothing_in_its_bases(
    engines: Engines, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    for engine in engines.speakers.values():
        monkeypatch.setattr(engine, "synthesize", _heard_by(engine.synthesize, said))
    fresh = load_cloner(engines.speakers)  # nothing kept from an earlier clone
    assert fresh is not None
    clip = np.concatenate(voice_clips(READER)[:3])

    clone = fresh.clone(Pcm(np.round(clip * 32767).astype(np.int16), ANALYSIS_RATE))

    assert clone.profile["base_voice"] in fresh.base_voices
    assert said == []


def _heard_by(synthesize: Callable[..., Pcm], said: list[str]) -> Callable[..., Pcm]:
    """`synthesize`, noting each voice it is asked for in `said`."""

    def noted(key: str, *args: Any, **kwargs: Any) -> Pcm:
        said.append(key)
        return synthesize(key, *args, **kwargs)

    return noted
