"""Engines come from one plugin table: settings name its entries, loading imports them, and
voice keys find them by prefix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from voice_service.core.vocabulary import Capability
from voice_service.engines.catalog import CLONE_BASE_VOICE, LOCAL_ENGINES, engine_names
from voice_service.engines.protocols import UnknownVoice
from voice_service.inference.engines import Engines
from voice_service.settings import Settings


def test_the_settings_name_the_tables_entries_by_capability(tmp_path: Path) -> None:
    assert engine_names(Capability.TEXT_TO_SPEECH) == ("piper", "kokoro", "espeak")
    assert engine_names(Capability.SPEECH_TO_TEXT) == ("whisper",)
    defaults = Settings(data_dir=tmp_path)
    assert defaults.tts_engine_names == engine_names(Capability.TEXT_TO_SPEECH)
    assert defaults.stt_engine_names == ("whisper",)
    # Every entry's summary reaches the settings' help (and so the README's table).
    help_text = str(Settings.model_fields["tts_engines"].description)
    help_text += str(Settings.model_fields["stt_engines"].description)
    assert all(f"{engine.name} ({engine.summary})" in help_text for engine in LOCAL_ENGINES)


def test_the_settings_are_checked_deduplicated_and_may_be_empty(tmp_path: Path) -> None:
    chosen = Settings(data_dir=tmp_path, tts_engines=" espeak, piper,espeak ")
    assert chosen.tts_engine_names == ("espeak", "piper")
    for empty in ("", " , "):
        assert Settings(data_dir=tmp_path, tts_engines=empty).tts_engine_names == ()
        assert Settings(data_dir=tmp_path, stt_engines=empty).stt_engine_names == ()
    with pytest.raises(
        ValidationError,
        match="festival: not a text-to-speech engine; name any of piper, kokoro, espeak",
    ):
        Settings(data_dir=tmp_path, tts_engines="piper,festival")
    # A transcriber is not a speaker, nor the other way round.
    with pytest.raises(ValidationError, match="whisper: not a text-to-speech engine"):
        Settings(data_dir=tmp_path, tts_engines="whisper")
    with pytest.raises(ValidationError, match="piper: not a speech-to-text engine"):
        Settings(data_dir=tmp_path, stt_engines="piper")


def test_a_node_without_local_engines_loads_none(tmp_path: Path) -> None:
    light = Engines.load(Settings(data_dir=tmp_path, tts_engines="", stt_engines=""))
    assert light.speakers == {}
    assert light.transcribers is None
    assert light.cloner is None
    assert light.catalogue() == []


def test_commands_that_load_no_engine_import_none() -> None:
    """`voice-service keys list` (any command but serve) starts without onnxruntime,
    CTranslate2, faster-whisper, PyAV or pyworld: it is quick, and it works on a machine
    whose inference libraries are broken."""
    heavy = ("onnxruntime", "ctranslate2", "faster_whisper", "pyworld", "piper", "av")
    script = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from voice_service.cli import app\n"
        "result = CliRunner().invoke(app, ['keys', 'list', 'org_none'])\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))\n"
    )
    shown = subprocess.run(  # noqa: S603
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert shown.stdout.strip().splitlines()[-1] == "[]", shown.stderr


def test_voice_keys_route_by_prefix(engines: Engines) -> None:
    assert list(engines.speakers) == ["piper", "kokoro", "espeak"]
    assert engines.chunk_speaker(CLONE_BASE_VOICE, None)("Hello.").samples.size > 0
    assert engines.chunk_speaker("espeak:de", None)("Hallo.").samples.size > 0


@pytest.mark.parametrize("key", ["festival:x", "piper:en_US-nobody-medium", "espeak:xx-zz"])
def test_an_unknown_voice_key_is_its_own_error(engines: Engines, key: str) -> None:
    with pytest.raises(UnknownVoice, match="no engine on this node speaks"):
        engines.chunk_speaker(key, None)


def test_whisper_runs_where_the_setting_says(tmp_path: Path) -> None:
    """The CUDA path is the CPU's with another device: `auto` finds what CTranslate2 finds,
    and `cuda` on a machine without a GPU stops the load with the engine's error."""
    import ctranslate2

    from voice_service.engines.protocols import EngineError
    from voice_service.engines.whisper import resolve_device
    from voice_service.inference.engines import load_transcriber

    gpus = ctranslate2.get_cuda_device_count()
    assert resolve_device("auto") == ("cuda" if gpus else "cpu")
    assert resolve_device("cpu") == "cpu"
    with pytest.raises(ValidationError, match="whisper_device"):
        Settings(data_dir=tmp_path, whisper_device="gpu")
    if not gpus:
        with pytest.raises(EngineError, match="could not load the Whisper model"):
            load_transcriber(Settings(data_dir=tmp_path, whisper_device="cuda"))
