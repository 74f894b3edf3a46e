"""The container image from the repository's Containerfile, built by Debian's podman on a
base made from Debian's packages: it runs as its own user with a health check, makes
speech, transcribes it back and clones a voice on SQLite, drains a stream on SIGTERM, and
two containers on the host's PostgreSQL and Redis share one key and one job queue.

Run by .ci/run's image pass (PostgreSQL and Redis set); the first pass leaves it out."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import av
import httpx
import pytest
from bench.podman import (
    IMAGE,
    USER_ID,
    Container,
    Podman,
    logs,
    running_container,
)
from bench.speech_set import real_clips
from bench.wer import word_errors

from tests.helpers.app import REDIS_URL, fresh_database, postgres_rows
from tests.helpers.jobs import one_recording, wav_bytes
from tests.helpers.voices import JOE
from voice_service.audio.encode import wav_of

SAID = "The quick brown fox jumps over the lazy dog."
LONG = " ".join(["Every sentence here is read aloud, one after another, to the end."] * 12)
PEPPER = "image-test-pepper"
MAX_BYTES = 1_600_000_000  # the target for the image with its models

requires_backends = pytest.mark.skipif(
    not REDIS_URL, reason="two nodes share PostgreSQL and Redis (.ci/run's image pass)"
)


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Podman:
    return Podman(tmp_path_factory.mktemp("podman"))


@pytest.fixture(scope="module")
def image(podman: Podman, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The image, built; and what `podman image inspect` says of it."""
    directory = tmp_path_factory.mktemp("image")
    base = podman.debian_base(directory)
    podman.build(base, directory / "build.log")
    (inspected,) = json.loads(podman("image", "inspect", IMAGE))
    inspected["BaseSize"] = podman.size(base)
    return dict(inspected)


def _auth(container: Container) -> dict[str, str]:
    return {"Authorization": f"Bearer {container.first['api_key']}"}


def test_the_image_runs_as_its_own_user_with_a_health_check_and_its_models(
    image: dict[str, Any], podman: Podman, tmp_path: Path
) -> None:
    config = image["Config"]
    assert config["User"] == "voice-service"
    assert "/readyz" in " ".join(image["Healthcheck"]["Test"])  # Docker's format keeps it
    assert config["StopSignal"] == "SIGTERM"
    assert "/var/lib/voice-service" in config["Volumes"]
    # What the image adds to its base: the service, its dependencies and its models (the
    # default base, Python's slim image, is far smaller than the Debian one made here).
    added = image["Size"] - image["BaseSize"]
    assert added + 150_000_000 <= MAX_BYTES, f"the image adds {added:,} bytes to its base"
    with running_container(podman, "vs-test-user", {}, data_dir=tmp_path / "data") as node:
        ids = podman("exec", node.name, "id", "-u")
        assert int(ids) == USER_ID
        made = podman("exec", node.name, "ls", "-n", "/var/lib/voice-service")
        assert "voice-service.db" in made
        # The models are in the image: nothing was fetched, and none is missing.
        ready = httpx.get(f"{node.root}/readyz").json()
        assert ready["checks"] == {"engines": True, "database": True}
        assert ready["warnings"] == []


def test_a_container_makes_speech_transcribes_it_back_and_clones_on_sqlite(
    image: dict[str, Any], podman: Podman, tmp_path: Path
) -> None:
    with running_container(podman, "vs-test-sqlite", {}, data_dir=tmp_path / "data") as node:
        assert node.first["database"].startswith("sqlite+aiosqlite:////var/lib/voice-service/")
        with httpx.Client(base_url=node.base_url, headers=_auth(node), timeout=300) as client:
            spoken = client.post("/text-to-speech", json={"text": SAID, "voice_id": JOE})
            assert spoken.status_code == 200, spoken.text
            heard = client.post(
                "/speech-to-text",
                files={"file": ("said.mp3", spoken.content, "audio/mpeg")},
                data={"language": "en"},
            )
            assert heard.status_code == 200, heard.text
            assert word_errors(SAID, heard.json()["text"])[0] == 0
            # A real person's recording: the speaker encoder the clone needs is in the image.
            person = real_clips()[0]
            cloned = client.post(
                "/voices/clone",
                data={"name": "Reader", "consent": "true"},
                files={"file": ("reader.wav", wav_of(person.audio, 16_000), "audio/wav")},
            )
            assert cloned.status_code == 201, cloned.text
            voice = cloned.json()["voice"]["id"]
            said = client.post("/text-to-speech", json={"text": SAID, "voice_id": voice})
            assert said.status_code == 200, said.text


def test_sigterm_lets_a_stream_in_flight_finish_then_the_container_exits_0(
    image: dict[str, Any], podman: Podman, tmp_path: Path
) -> None:
    with running_container(podman, "vs-test-drain", {}, data_dir=tmp_path / "data") as node:
        body = {"text": LONG, "voice_id": JOE}
        with (
            httpx.Client(base_url=node.base_url, headers=_auth(node), timeout=300) as client,
            client.stream("POST", "/text-to-speech/stream", json=body) as streamed,
        ):
            assert streamed.status_code == 200
            chunks = streamed.iter_bytes()
            audio = next(chunks)
            podman("kill", "--signal=TERM", node.name)
            audio += b"".join(chunks)  # a cut stream raises here: its chunked body unended
        exit_code = podman("wait", node.name, timeout=120)
        _, stderr = logs(podman, node.name)
    assert int(exit_code) == 0
    # The node's own word that the stream was still being answered when it stopped taking
    # connections (idle connections are closed before uvicorn says this).
    assert "Waiting for connections to close" in stderr
    seconds = _mp3_seconds(audio, tmp_path / "streamed.mp3")
    assert seconds > 40  # every sentence, not the first ones alone


def _mp3_seconds(audio: bytes, path: Path) -> float:
    path.write_bytes(audio)
    with av.open(str(path)) as container:
        frames = sum(frame.samples for frame in container.decode(audio=0))
        rate = container.streams.audio[0].rate
    return float(frames / rate)


@pytest.fixture
def shared_database(tmp_path: Path) -> Iterator[str]:
    with fresh_database(tmp_path) as url:
        assert url.startswith("postgresql"), "the image pass runs on PostgreSQL"
        yield url


@requires_backends
def test_two_containers_share_one_key_and_one_job_queue(
    image: dict[str, Any], podman: Podman, shared_database: str
) -> None:
    assert REDIS_URL
    environment = {
        "VOICE_SERVICE_DATABASE_URL": shared_database,
        "VOICE_SERVICE_REDIS_URL": REDIS_URL,
        "VOICE_SERVICE_KEY_PEPPER": PEPPER,
    }
    with (
        running_container(podman, "vs-test-node-a", environment) as first,
        running_container(podman, "vs-test-node-b", environment) as second,
    ):
        assert "api_key" in first.first and "api_key" not in second.first
        key = _auth(first)
        listed = httpx.get(f"{second.base_url}/voices", headers=key, timeout=60)
        assert listed.status_code == 200
        submitted = httpx.post(
            f"{second.base_url}/transcription-jobs",
            headers=key,
            files={"file": ("reader.wav", wav_bytes(one_recording()), "audio/wav")},
            data={"language": "en"},
            timeout=120,
        )
        assert submitted.status_code == 202, submitted.text
        job_id = submitted.json()["id"]
        done = _finished(f"{first.base_url}/transcription-jobs/{job_id}", key)
        assert done["status"] == "completed", done
        edits, words = real_clips()[0].errors(done["result"]["text"])
        assert edits <= words // 5, done["result"]["text"]
    rows = asyncio.run(
        postgres_rows(
            shared_database,
            "SELECT endpoint, units FROM usage_records WHERE request_id = $1",
            done["request_id"],
        )
    )
    assert rows == [("speech-to-text", done["units"])]


def _finished(url: str, headers: dict[str, str]) -> dict[str, Any]:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        job: dict[str, Any] = httpx.get(url, headers=headers, timeout=60).json()
        if job["status"] in ("completed", "failed", "cancelled"):
            return job
        time.sleep(0.5)
    raise AssertionError(f"the job never finished: {job}")
