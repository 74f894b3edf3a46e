"""Two nodes on PostgreSQL offering a Whisper model pulled once into one models dir that
both read (VOICE_SERVICE_MODELS_DIR): each serves it by name, and neither joins the packaged
model into its own data dir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from bench.hub import BASE, answer, models, running_hub
from bench.speech_set import real_clips

from tests.cluster.harness import Cluster, requires_backends
from voice_service.audio.encode import wav_of
from voice_service.engines.whisper import prepare_base_model

pytestmark = requires_backends

REDIS_DB = 2  # the package's shared cluster keeps db 1


@pytest.fixture(scope="module")
def sharing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("shared-models")
    base_files = prepare_base_model(directory / "packaged")
    served = {(BASE.repo, BASE.revision, f.name): base_files / f.name for f in BASE.files}
    with running_hub(served) as hub:
        answer(models(directory / "puller", hub, "pull", "base", "--json"))
    settings = {"models_dir": str(directory / "puller" / "models"), "whisper_models": "base"}
    with Cluster(directory / "cluster", REDIS_DB, settings=settings) as cluster:
        yield cluster


def test_two_nodes_serve_the_model_pulled_once_into_their_shared_models_dir(
    sharing: Cluster,
) -> None:
    key = sharing.create_key()
    clip = real_clips()[0]
    for node in sharing.nodes:
        listed = httpx.get(f"{node.base_url}/models", headers=key.headers, timeout=30)
        assert [(m["model_id"], m["default"]) for m in listed.json()["models"]] == [("base", True)]
        answered = httpx.post(
            f"{node.base_url}/speech-to-text",
            headers=key.headers,
            files={"file": ("person.wav", wav_of(clip.audio, 16_000), "audio/wav")},
            data={"model_id": "base", "language": "en"},
            timeout=120,
        )
        assert answered.status_code == 200, answered.text
        edits, words = clip.errors(answered.json()["text"])
        assert edits <= words // 5, answered.text
        logged = sharing.db.scalar(
            "SELECT model FROM request_log WHERE request_id = :id",
            id=answered.headers["x-request-id"],
        )
        assert logged == "base"
        # Loaded from the shared dir: the packaged model was never joined into its own.
        data_dir = Path(node.env["VOICE_SERVICE_DATA_DIR"])
        assert not (data_dir / "models" / "whisper-base").exists()
