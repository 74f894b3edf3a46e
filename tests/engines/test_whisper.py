"""faster-whisper with the packaged models, on real synthesized speech."""

from __future__ import annotations

import hashlib
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from tests import speech_clips as sc

from voice_service.audio.decode import decode_audio
from voice_service.audio.formats import identify_audio
from voice_service.engines.protocols import EngineError
from voice_service.engines.whisper import (
    BASE_MODEL_BYTES,
    BASE_MODEL_SHA256,
    WhisperEngine,
    english_model_dir,
    prepare_base_model,
)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def engine(data_dir: Path) -> WhisperEngine:
    return WhisperEngine(data_dir, english_model=english_model_dir())


def words(text: str) -> list[str]:
    return re.sub(r"[^\w\s]", " ", text.lower()).split()


def word_errors(reference: str, hypothesis: str) -> int:
    """Word-level edit distance."""
    ref, hyp = words(reference), words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        previous, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (r != h))
    return row[-1]


def test_base_model_is_joined_once_and_verified(engine: WhisperEngine, data_dir: Path) -> None:
    folder = data_dir / "models" / "whisper-base"
    model = folder / "model.bin"
    assert model.stat().st_size == BASE_MODEL_BYTES
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    assert digest == BASE_MODEL_SHA256
    assert {p.name for p in folder.iterdir()} == {
        "model.bin",
        "config.json",
        "tokenizer.json",
        "vocabulary.txt",
    }  # no temporary files left behind
    mtime = model.stat().st_mtime_ns
    assert prepare_base_model(data_dir) == folder
    assert model.stat().st_mtime_ns == mtime  # reused, not joined again


def test_damaged_copy_is_joined_again(tmp_path: Path) -> None:
    folder = prepare_base_model(tmp_path)
    with (folder / "model.bin").open("r+b") as f:
        f.truncate(1000)
    prepare_base_model(tmp_path)
    assert (folder / "model.bin").stat().st_size == BASE_MODEL_BYTES


def test_missing_model_directory_is_an_engine_error(tmp_path: Path) -> None:
    with pytest.raises(EngineError):
        WhisperEngine(tmp_path, model_dir=tmp_path / "nowhere")


def test_languages_are_iso_639_1(engine: WhisperEngine) -> None:
    languages = engine.languages()
    assert {"en", "de", "es", "fr", "zh", "ja", "jv"} <= languages
    assert all(len(code) == 2 for code in languages)
    assert "jw" not in languages
    assert len(languages) >= 95


def test_english_with_a_hint(engine: WhisperEngine) -> None:
    for text in sc.ENGLISH_TEXTS[1:2]:
        result = engine.transcribe(sc.resample_16k(sc.english_speech(text)), "en")
        assert result.language == "en"
        assert word_errors(text, result.text) <= 1, result.text


def test_detects_english(engine: WhisperEngine) -> None:
    result = engine.transcribe(sc.resample_16k(sc.english_speech()), None)
    assert result.language == "en"
    assert word_errors(sc.ENGLISH_TEXT, result.text) <= 1, result.text


def test_detects_german(engine: WhisperEngine) -> None:
    result = engine.transcribe(sc.resample_16k(sc.espeak_speech(sc.GERMAN_TEXT, "de")), None)
    assert result.language == "de"
    assert "guten morgen" in " ".join(words(result.text))


def test_spanish_with_a_hint(engine: WhisperEngine) -> None:
    result = engine.transcribe(sc.resample_16k(sc.espeak_speech(sc.SPANISH_TEXT, "es")), "es")
    assert result.language == "es"
    assert "buenos días" in " ".join(words(result.text))


def test_from_an_uploaded_file(engine: WhisperEngine, tmp_path: Path) -> None:
    path = sc.write_audio(tmp_path / "upload", sc.english_speech(), "webm-opus")
    audio = decode_audio(path, max_seconds=60, fmt=identify_audio(path))
    result = engine.transcribe(audio.samples, "en")
    assert word_errors(sc.ENGLISH_TEXT, result.text) <= 1, result.text


def test_silence_and_empty_audio(engine: WhisperEngine) -> None:
    assert engine.transcribe(np.zeros(0, dtype=np.float32), None).text == ""
    assert engine.transcribe(np.zeros(16000, dtype=np.float32), "de").language == "de"


def test_unknown_language_is_refused(engine: WhisperEngine) -> None:
    with pytest.raises(ValueError, match="language"):
        engine.transcribe(np.zeros(16000, dtype=np.float32), "xx")


def test_concurrent_calls(engine: WhisperEngine) -> None:
    clips = [
        (sc.ENGLISH_TEXTS[0], sc.resample_16k(sc.english_speech(sc.ENGLISH_TEXTS[0])), "en"),
        (sc.SPANISH_TEXT, sc.resample_16k(sc.espeak_speech(sc.SPANISH_TEXT, "es")), "es"),
    ]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda c: engine.transcribe(c[1], c[2]), clips * 2))
    assert [r.language for r in results] == ["en", "es", "en", "es"]
    assert results[0].text == results[2].text
    assert results[1].text == results[3].text
