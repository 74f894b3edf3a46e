"""The packaged Whisper base, and a loopback Hub that serves it at the catalogue's commit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from bench.hub import BASE, Hub, running_hub

from voice_service.engines.whisper import prepare_base_model


@pytest.fixture(scope="module")
def base_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packaged Whisper base, joined: the files Systran/faster-whisper-base holds."""
    return prepare_base_model(tmp_path_factory.mktemp("packaged"))


@pytest.fixture
def hub(base_files: Path) -> Iterator[Hub]:
    files = {(BASE.repo, BASE.revision, f.name): base_files / f.name for f in BASE.files}
    with running_hub(files) as serving:
        yield serving
