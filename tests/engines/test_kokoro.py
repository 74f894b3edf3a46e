"""Kokoro-82M with the packaged model and voices, checked by ear: the service's own Whisper."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from bench.wer import word_error_rate

from tests.helpers.inference import heard
from voice_service.engines import kokoro as kokoro_module
from voice_service.engines.kokoro import (
    ALLOWED,
    LANGUAGES,
    MODEL_BYTES,
    MODEL_FILE,
    MODEL_SHA256,
    KokoroEngine,
    model_parts,
    prepare_model,
)
from voice_service.engines.model_files import ModelIntegrityError
from voice_service.engines.protocols import Pcm
from voice_service.inference.engines import Engines

# One sentence per language: each catalogue voice must say it so that Whisper hears it back.
SENTENCES = {
    "es": "Por favor, envíe el informe al equipo de finanzas antes del viernes.",
    "fr": "Merci d'envoyer le rapport à l'équipe financière avant vendredi.",
    "it": "Il mio colore preferito è il verde e mi piace camminare nel parco.",
    "pt": "Por favor, envie o relatório para a equipe de finanças antes de sexta-feira.",
    "ja": "今日は天気が良いので、午後は公園を散歩しましょう。",
    "en": "Please send the quarterly report to the finance team before Friday.",
}
PAIRS = [(style, code) for code, styles in ALLOWED.items() for style in styles]


@pytest.fixture(scope="module")
def kokoro(engines: Engines) -> KokoroEngine:
    engine = engines.speakers["kokoro"]
    assert isinstance(engine, KokoroEngine)
    return engine


def test_model_parts_are_joined_once_and_verified(tmp_path: Path) -> None:
    model = prepare_model(tmp_path)
    assert model.name == MODEL_FILE
    assert model.stat().st_size == MODEL_BYTES
    assert hashlib.sha256(model.read_bytes()).hexdigest() == MODEL_SHA256
    assert [p.name for p in model.parent.iterdir()] == [MODEL_FILE]  # no temporary files
    mtime = model.stat().st_mtime_ns
    assert prepare_model(tmp_path) == model
    assert model.stat().st_mtime_ns == mtime  # reused, not joined again


def test_a_corrupted_part_is_refused(tmp_path: Path) -> None:
    parts = model_parts()
    damaged = bytearray(parts[2].read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF  # same size, one byte flipped
    (tmp_path / "part3.bin").write_bytes(damaged)
    data_dir = tmp_path / "data"
    with pytest.raises(ModelIntegrityError, match=r"SHA-256.*reinstall the model packages"):
        prepare_model(data_dir, [parts[0], parts[1], tmp_path / "part3.bin", parts[3]])
    assert list((data_dir / "models" / "kokoro-82m").iterdir()) == []


def test_catalogue_offers_the_allowed_voices_with_readable_names(kokoro: KokoroEngine) -> None:
    voices = {voice.key: voice for voice in kokoro.voices()}
    assert list(voices) == [f"kokoro:{style}:{code}" for style, code in PAIRS]
    assert voices["kokoro:jm_kumo:es"].name == "Kokoro Kumo (Spanish)"
    assert voices["kokoro:jm_kumo:pt"].name == "Kokoro Kumo (Portuguese, Brazil)"
    assert voices["kokoro:jf_alpha:ja"].name == "Kokoro Alpha (Japanese)"
    assert voices["kokoro:jm_kumo:en"].name == "Kokoro Kumo (English, United States)"
    languages = {voice.language for voice in voices.values()}
    assert languages == {"es", "fr", "it", "pt-BR", "ja", "en-US"}


def test_without_the_ja_extra_the_japanese_voices_are_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kokoro_module, "japanese_front_end_installed", lambda: False)
    engine = KokoroEngine(tmp_path, clone_styles=())
    languages = {voice.language for voice in engine.voices()}
    assert languages == {"es", "fr", "it", "pt-BR", "en-US"}


def test_a_japanese_front_end_that_fails_leaves_only_japanese_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> object:
        raise ImportError("libopenjtalk.so: cannot open shared object file")

    monkeypatch.setattr(kokoro_module, "_japanese_phonemizer", broken)
    engine = KokoroEngine(tmp_path, clone_styles=())
    assert {voice.language for voice in engine.voices()} == {"es", "fr", "it", "pt-BR", "en-US"}
    with pytest.raises(KeyError):
        engine.synthesize("kokoro:jf_alpha:ja", "こんにちは。")
    assert engine.synthesize("kokoro:jm_kumo:it", "Ciao.").samples.size > 0


@pytest.mark.parametrize(("style", "code"), PAIRS, ids=[f"{s}-{c}" for s, c in PAIRS])
def test_every_allowed_voice_is_understood_in_its_language(
    engines: Engines, kokoro: KokoroEngine, style: str, code: str
) -> None:
    text = SENTENCES[code]
    pcm = kokoro.synthesize(f"kokoro:{style}:{code}", text)
    assert pcm.sample_rate == 24_000
    assert pcm.samples.dtype == np.int16
    language = LANGUAGES[code].tag.split("-")[0]
    transcript = heard(engines, pcm, language)
    assert word_error_rate(text, transcript, language) <= 0.10, transcript


def test_unknown_voice_is_refused(kokoro: KokoroEngine) -> None:
    # Alpha garbles French: it says it only for clones that ask for it, never in the catalogue.
    assert "kokoro:jf_alpha:fr" not in {voice.key for voice in kokoro.voices()}
    with pytest.raises(KeyError):
        kokoro.synthesize("kokoro:jf_alpha:de", "Hallo.")


def test_a_paragraph_streams_in_several_chunks_the_first_one_short(
    engines: Engines, kokoro: KokoroEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    synthesize = kokoro.synthesize

    def recording(voice_key: str, text: str, speed: float = 1.0) -> Pcm:
        said.append(text)
        return synthesize(voice_key, text, speed)

    monkeypatch.setattr(kokoro, "synthesize", recording)
    text = "Buenos días a todos. Hoy hablamos del tiempo. Mañana hará sol en la ciudad."
    parts = engines.speech_parts("kokoro:jm_kumo:es", None, text, quick_start=True)
    chunks = (speak() for speak in parts)
    first = next(chunks)
    assert len(said) == 1  # the first chunk is ready before the rest is synthesized
    rest = list(chunks)
    assert len(rest) >= 2
    assert first.pcm.duration_seconds < sum(chunk.pcm.duration_seconds for chunk in rest)
