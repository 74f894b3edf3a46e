"""Engines are registered by name, chosen by settings and found by voice-key prefix."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from voice_service import settings as settings_module
from voice_service.engines.protocols import UnknownVoice
from voice_service.engines.registry import CLONE_BASE_VOICE, TTS_ENGINES, Engines
from voice_service.settings import Settings


def test_every_engine_a_setting_can_name_is_registered() -> None:
    assert tuple(TTS_ENGINES) == settings_module.TTS_ENGINES


def test_the_setting_is_checked_and_deduplicated(tmp_path: Path) -> None:
    chosen = Settings(data_dir=tmp_path, tts_engines=" espeak, piper,espeak ")
    assert chosen.tts_engine_names == ("espeak", "piper")
    for wrong in ("festival", "", " , "):
        with pytest.raises(ValidationError, match="name one or more of piper, kokoro, espeak"):
            Settings(data_dir=tmp_path, tts_engines=wrong)


def test_voice_keys_route_by_prefix(engines: Engines) -> None:
    assert list(engines.speakers) == ["piper", "kokoro", "espeak"]
    assert engines.chunk_speaker(CLONE_BASE_VOICE, None)("Hello.").samples.size > 0
    assert engines.chunk_speaker("espeak:de", None)("Hallo.").samples.size > 0


@pytest.mark.parametrize("key", ["festival:x", "piper:en_US-nobody-medium", "espeak:xx-zz"])
def test_an_unknown_voice_key_is_its_own_error(engines: Engines, key: str) -> None:
    with pytest.raises(UnknownVoice, match="no engine on this node speaks"):
        engines.chunk_speaker(key, None)
