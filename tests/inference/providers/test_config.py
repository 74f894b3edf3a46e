"""The providers file is checked at start: a mistake stops the node with one line naming
the file, the line and the key."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers.servers import CLI
from voice_service.inference.providers.config import ProvidersFileError, load_providers

GOOD = """\
[[provider]]
name = "gpu-whisper"
kind = "openai"
base_urls = ["http://10.0.0.5:8000/v1", "http://10.0.0.6:8000/v1/"]
api_key_env = "GPU_WHISPER_KEY"
timeout_seconds = 60
max_concurrency = 16

[provider.transcription]
model = "large-v3"
languages = ["*"]

[[provider]]
name = "eleven"
kind = "elevenlabs"
api_key_env = "ELEVEN_KEY"

[provider.speech]
model = "eleven_multilingual_v2"
voices = [
  { voice = "21m00Tcm4TlvDq8gFCjr", name = "Rachel", language = "en" },
]

[provider.cloning]
"""
ENV = {"GPU_WHISPER_KEY": "sk-gpu", "ELEVEN_KEY": "xi-key"}


def _load(tmp_path: Path, text: str, env: dict[str, str] = ENV) -> list[object]:
    path = tmp_path / "providers.toml"
    path.write_text(text)
    return list(load_providers(path, env))


def test_a_good_file_gives_each_provider_its_settings_and_key(tmp_path: Path) -> None:
    whisper, eleven = load_providers(_write(tmp_path, GOOD), ENV)
    assert whisper.config.urls == ("http://10.0.0.5:8000/v1", "http://10.0.0.6:8000/v1")
    assert whisper.api_key == "sk-gpu"
    assert whisper.config.transcription is not None
    assert whisper.config.transcription.model == "large-v3"
    assert eleven.config.urls == ("https://api.elevenlabs.io",)  # the hosted API by default
    assert eleven.config.timeout_seconds == 60 and eleven.config.max_concurrency == 16
    assert eleven.config.cloning is not None and eleven.api_key == "xi-key"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (('kind = "openai"', 'kind = "vllm"'), r"line 3: provider\[0\]\.kind: Input should be "),
        (
            ('"http://10.0.0.6:8000/v1/"', '"ftp://10.0.0.6/v1"'),
            r"line 4: provider\[0\]\.base_urls\[1\]: each must be an http:// or https:// URL",
        ),
        (("max_concurrency = 16", "max_concurrency = 0"), r"line 7: provider\[0\]\.max_conc"),
        (('languages = ["*"]', 'languages = ["french"]'), r"line 11: .*ISO 639-1 code"),
        (
            ('name = "Rachel"', 'nom = "Rachel"'),
            r"line 20: provider\[1\]\.speech\.voices\[0\]\.name: Field required",
        ),
        (('name = "eleven"', 'name = "gpu-whisper"'), r"line 14: .*used by an earlier provider"),
        (('name = "eleven"', 'name = "piper"'), r"line 14: .*a local engine's name"),
        (('name = "eleven"', 'name = "Eleven Labs"'), r"line 14: .*lowercase letters"),
        (('kind = "elevenlabs"', 'kind = "openai"'), r"line 24: .*cloning: only kind"),
        (("timeout_seconds = 60", 'timeout_seconds = "soon"'), r"line 6: provider\[0\]\.time"),
        (("[provider.cloning]", "[provider.clonig]"), r"line 24: provider\[1\]\.clonig: Extra"),
        (
            ('languages = ["*"]', 'languages = ["*"]\ndiarize_model = "gpt-4o-transcribe-diarize"'),
            r"line 1\d: .*transcription\.diarize_model: only kind = \"openai\" with diarize",
        ),
        (("http://10.0.0.5", "http://u:p@10.0.0.5"), r"line 4: .*user:password cannot be used"),
    ],
)
def test_a_mistake_names_the_line_and_the_key(
    tmp_path: Path, change: tuple[str, str], expected: str
) -> None:
    with pytest.raises(ProvidersFileError, match=expected) as raised:
        _load(tmp_path, GOOD.replace(*change))
    assert str(raised.value).startswith(f"{tmp_path / 'providers.toml'}, line ")
    assert "\n" not in str(raised.value)


def test_a_key_variable_that_is_not_set_is_named(tmp_path: Path) -> None:
    with pytest.raises(ProvidersFileError, match=r"line 16: .*the variable ELEVEN_KEY is not set"):
        _load(tmp_path, GOOD, {"GPU_WHISPER_KEY": "sk-gpu"})


def test_broken_toml_and_a_provider_that_offers_nothing(tmp_path: Path) -> None:
    with pytest.raises(ProvidersFileError, match=r"not valid TOML: .*line 2"):
        _load(tmp_path, '[[provider]]\nname = "x\n')
    with pytest.raises(ProvidersFileError, match=r"line 2: provider\[0\]\.name: give it at least"):
        _load(tmp_path, '[[provider]]\nname = "idle"\nkind = "openai"\n')


def test_serve_stops_on_a_bad_file_with_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace('kind = "openai"', 'kind = "vllm"'))
    finished = subprocess.run(  # noqa: S603
        [*CLI, "--data-dir", str(tmp_path / "data"), "serve", "--port", "0"],
        env={"VOICE_SERVICE_PROVIDERS_FILE": str(path), "PATH": "/usr/bin:/bin", **ENV},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 1
    assert finished.stdout == ""
    assert finished.stderr.startswith(f"error: {path}, line 3: provider[0].kind: ")
    assert len(finished.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "data").exists()  # nothing made, no port taken


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "providers.toml"
    path.write_text(text)
    return path
