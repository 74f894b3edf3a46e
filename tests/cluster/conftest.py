"""One cluster (2 nodes x 2 workers) for the whole package: every node loads Whisper and
Piper, so starts are what this package spends its time on. Each test gets it healthy
(proxies forwarding, every worker up, no warnings) and leaves it however it likes."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.cluster.harness import Clip, Cluster, Key, Workload
from tests.helpers.speech_clips import english_speech, write_audio
from voice_service.engines.protocols import Pcm

CLUSTER_REDIS_DB = 1  # the rest of the suite uses db 0
CLIP_SECONDS = 1.5  # billed as 2: far from a whole second, so rounding cannot hide


@pytest.fixture(scope="package")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("cluster"), CLUSTER_REDIS_DB) as cluster:
        yield cluster


@pytest.fixture
def cluster(shared_cluster: Cluster) -> Cluster:
    shared_cluster.ensure_healthy()
    return shared_cluster


@pytest.fixture(scope="package")
def load_key(shared_cluster: Cluster) -> Key:
    return shared_cluster.create_key(rate_limit=1_000_000)  # the load is never limited


@pytest.fixture(scope="package")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Clip:
    """A few words of speech, cut or padded to exactly CLIP_SECONDS, as 16-bit WAV."""
    speech = english_speech("Good morning, everyone.")
    count = int(CLIP_SECONDS * speech.sample_rate)
    samples = np.zeros(count, dtype=np.int16)
    samples[: min(count, len(speech.samples))] = speech.samples[:count]
    pcm = Pcm(samples=samples, sample_rate=speech.sample_rate)
    path = write_audio(tmp_path_factory.mktemp("clip") / "clip.wav", pcm, "wav-s16")
    return Clip(Path(path).read_bytes(), count, speech.sample_rate)


@pytest.fixture
def workload(load_key: Key, clip: Clip) -> Workload:
    return Workload(load_key, clip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test's report carries the tail of every node's stderr."""
    report = yield
    cluster = getattr(item, "funcargs", {}).get("cluster")
    if report.failed and isinstance(cluster, Cluster):
        report.sections.append(("cluster nodes (stderr tails)", cluster.diagnostics()))
    return report
