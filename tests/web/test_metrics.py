"""GET /metrics: Prometheus' text format whose counters agree with the request log and the
usage table after a mixed load, behind its token when one is set, and summed over the
worker processes of `serve --workers 2`."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from tests.helpers import speech_clips as clips
from tests.helpers.api import assert_error, clone, raised_voice_sample
from tests.helpers.app import REDIS_URL, Tenant, Tenants, fresh_database, make_settings, running
from tests.helpers.servers import Server, running_server
from tests.helpers.voices import JOE
from voice_service.app import create_app
from voice_service.core.models import RequestLogEntry, UsageRecord
from voice_service.inference.engines import Engines
from voice_service.web.context import AppContext

pytestmark = pytest.mark.anyio

UNKNOWN_VOICE = "voice_000000000000000000000000"
BAD_KEY = {"Authorization": "Bearer vs_" + "x" * 40}
METRICS = "http://testserver/metrics"

Labels = tuple[tuple[str, str], ...]


def samples(exposition: str) -> dict[str, dict[Labels, float]]:
    """Every sample of the text format, parsed by prometheus-client: name -> labels -> value."""
    parsed: dict[str, dict[Labels, float]] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            labels = tuple(sorted(sample.labels.items()))
            parsed.setdefault(sample.name, {})[labels] = sample.value
    return parsed


def by(values: dict[Labels, float], *names: str) -> dict[tuple[str, ...], float]:
    """`values` keyed by the named labels' values, in that order."""
    return {tuple(dict(labels)[name] for name in names): value for labels, value in values.items()}


@dataclass
class Service:
    app: FastAPI
    client: httpx.AsyncClient
    tenants: Tenants

    @property
    def context(self) -> AppContext:
        context: AppContext = self.app.state.context
        return context

    async def scrape(self, headers: dict[str, str] | None = None) -> tuple[str, str]:
        """The metrics text, and the scrape's own request id (its row comes after it)."""
        response = await self.client.get(METRICS, headers=headers)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/plain")
        return response.text, response.headers["x-request-id"]

    async def logged(self, excluding: str) -> Counter[tuple[str, str]]:
        """Request-log rows by (endpoint label, status), as the metrics should count them."""
        rows = await self.tenants.run(
            lambda s: s.execute(
                select(RequestLogEntry.method, RequestLogEntry.path, RequestLogEntry.status).where(
                    RequestLogEntry.request_id != excluding
                )
            )
        )
        return Counter(
            (self.context.metrics.endpoints.of(method, path), str(status))
            for method, path, status in rows.all()
        )

    async def billed(self) -> dict[tuple[str], float]:
        async def work(session: AsyncSession) -> dict[tuple[str], float]:
            rows = await session.execute(
                select(UsageRecord.endpoint, func.sum(UsageRecord.units)).group_by(
                    UsageRecord.endpoint
                )
            )
            return {(endpoint,): float(units) for endpoint, units in rows.all()}

        return await self.tenants.run(work)


@pytest.fixture
def own_database(tmp_path: Path) -> Iterator[str]:
    # Its own: the counts are compared with every row of the request log.
    with fresh_database(tmp_path) as url:
        yield url


async def serving(
    tmp_path: Path, database_url: str, engines: Engines, **overrides: object
) -> AsyncIterator[Service]:
    settings = make_settings(tmp_path, database_url, **overrides)
    app = create_app(settings, engines)
    async with running(app) as client:
        yield Service(app, client, Tenants(settings))


@pytest.fixture
async def service(tmp_path: Path, own_database: str, engines: Engines) -> AsyncIterator[Service]:
    async for started in serving(tmp_path, own_database, engines):
        yield started


async def mixed_load(service: Service, tmp_path: Path) -> Tenant:
    """Successes of every capability (one streamed), and each kind of refusal."""
    client = service.client
    tenant = await service.tenants.create()
    speak = {"text": "Hello there.", "voice_id": JOE}
    assert (await client.post("/text-to-speech", headers=tenant.headers, json=speak)).is_success
    audio = clips.write_audio(tmp_path / "a.wav", clips.english_speech(), "wav-s16")
    heard = await client.post(
        "/speech-to-text",
        headers=tenant.headers,
        files={"file": ("a.wav", audio.read_bytes(), "audio/wav")},
        data={"language": "en"},
    )
    assert heard.is_success, heard.text
    openai_speech = {"model": "tts-1", "voice": "alloy", "input": "Hi.", "response_format": "wav"}
    streamed = await client.post(
        "http://testserver/v1/audio/speech", headers=tenant.headers, json=openai_speech
    )
    assert streamed.is_success, streamed.text
    cloned = await clone(client, tenant, raised_voice_sample(tmp_path))
    assert cloned.status_code == 201, cloned.text
    in_clone = {"text": "Hi.", "voice_id": cloned.json()["voice"]["id"]}
    assert (await client.post("/text-to-speech", headers=tenant.headers, json=in_clone)).is_success

    assert_error(await client.get("/voices", headers=BAD_KEY), 401, "INVALID_API_KEY")
    no_text = {"text": "", "voice_id": JOE}
    refused = await client.post("/text-to-speech", headers=tenant.headers, json=no_text)
    assert_error(refused, 400, "INVALID_REQUEST")
    assert_error(await client.get("/no-such-route", headers=tenant.headers), 404, "NOT_FOUND")
    gone = await client.delete(f"/voices/{UNKNOWN_VOICE}", headers=tenant.headers)
    assert_error(gone, 404, "NOT_FOUND")
    assert_error(
        await client.put("/text-to-speech", headers=tenant.headers), 405, "INVALID_REQUEST"
    )
    limited = await service.tenants.create(rate_limit=1)
    assert (await client.get("/voices", headers=limited.headers)).is_success
    assert_error(await client.get("/voices", headers=limited.headers), 429, "RATE_LIMITED")
    assert (await client.head("http://testserver/healthz")).is_success
    return tenant


async def test_counters_match_the_request_log_and_usage_after_a_mixed_load(
    service: Service, tmp_path: Path
) -> None:
    await mixed_load(service, tmp_path)
    text, scrape_id = await service.scrape()
    found = samples(text)
    logged = await service.logged(excluding=scrape_id)
    counted = by(found["voice_service_requests_total"], "endpoint", "status")
    assert counted == {key: float(count) for key, count in logged.items()}
    # The labels are route templates, and "none" where no route matched.
    assert (
        counted.items()
        >= {
            ("/api/v1/text-to-speech", "200"): 2.0,  # in Joe's voice and in the clone's
            ("/api/v1/speech-to-text", "200"): 1.0,
            ("/v1/audio/speech", "200"): 1.0,
            ("/api/v1/voices/clone", "201"): 1.0,
            ("/api/v1/voices", "401"): 1.0,
            ("/api/v1/text-to-speech", "400"): 1.0,
            ("none", "404"): 1.0,
            ("/api/v1/voices/{id}", "404"): 1.0,
            ("/api/v1/text-to-speech", "405"): 1.0,
            ("/api/v1/voices", "429"): 1.0,
            ("/healthz", "200"): 1.0,
        }.items()
    )

    durations = by(found["voice_service_request_duration_seconds_count"], "endpoint")
    per_endpoint = Counter[str]()
    for (endpoint, _), count in logged.items():
        per_endpoint[endpoint] += count
    assert durations == {(endpoint,): float(n) for endpoint, n in per_endpoint.items()}

    assert by(found["voice_service_usage_units_total"], "endpoint") == await service.billed()
    assert found["voice_service_rate_limited_total"][()] == 1.0


async def test_inference_is_measured_per_engine_and_capability(
    service: Service, tmp_path: Path
) -> None:
    await mixed_load(service, tmp_path)
    found = samples((await service.scrape())[0])
    # Jobs: speech in Joe's voice (native and OpenAI's) by Piper; the clone's sample and
    # its speech by WORLD; one transcription by Whisper.
    assert by(found["voice_service_inference_seconds_count"], "engine") == {
        ("piper",): 2.0,
        ("world",): 2.0,
        ("whisper",): 1.0,
    }
    assert by(found["voice_service_inference_wait_seconds_count"], "capability") == {
        ("text-to-speech",): 3.0,
        ("speech-to-text",): 1.0,
        ("cloning",): 1.0,
    }
    assert set(by(found["voice_service_inference_queue_depth"], "capability").values()) == {0.0}
    assert set(by(found["voice_service_inference_running"], "capability").values()) == {0.0}
    assert "voice_service_engine_errors_total" not in found
    audio = by(found["voice_service_audio_seconds_total"], "capability")
    assert audio[("text-to-speech",)] > 0
    # The transcription's exact seconds, which its billed units round up.
    billed_seconds = (await service.billed())[("speech-to-text",)]
    assert billed_seconds - 1 < audio[("speech-to-text",)] <= billed_seconds


async def test_an_engine_past_its_deadline_counts_as_an_engine_error(
    tmp_path: Path, own_database: str, engines: Engines
) -> None:
    impatient = {"inference_timeout_seconds": 1e-6, "inference_timeout_per_audio_second": 0.0}
    async for service in serving(tmp_path, own_database, engines, **impatient):
        tenant = await service.tenants.create()
        response = await service.client.post(
            "/text-to-speech", headers=tenant.headers, json={"text": "Hello.", "voice_id": JOE}
        )
        assert_error(response, 502, "PROVIDER_ERROR")
        found = samples((await service.scrape())[0])
        assert by(found["voice_service_engine_errors_total"], "engine") == {("piper",): 1.0}
        counted = by(found["voice_service_requests_total"], "endpoint", "status")
        assert counted[("/api/v1/text-to-speech", "502")] == 1.0


async def test_a_metrics_token_is_required_once_set(
    tmp_path: Path, own_database: str, engines: Engines
) -> None:
    async for service in serving(tmp_path, own_database, engines, metrics_token="scrape-me"):
        missing = await service.client.get(METRICS)
        assert_error(missing, 401, "INVALID_API_KEY")
        assert missing.headers["www-authenticate"] == "Bearer"
        wrong = await service.client.get(METRICS, headers={"Authorization": "Bearer scrape-you"})
        assert_error(wrong, 401, "INVALID_API_KEY")
        text, _ = await service.scrape({"Authorization": "Bearer scrape-me"})
        counted = by(samples(text)["voice_service_requests_total"], "endpoint", "status")
        assert counted[("/metrics", "401")] == 2.0  # refused scrapes are requests like any


async def test_org_labels_name_the_organization_when_asked_for(
    tmp_path: Path, own_database: str, engines: Engines
) -> None:
    async for service in serving(tmp_path, own_database, engines, metrics_org_labels=True):
        tenant = await service.tenants.create()
        assert (await service.client.get("/voices", headers=tenant.headers)).is_success
        await service.client.get("/voices", headers=BAD_KEY)
        found = samples((await service.scrape())[0])
        counted = by(found["voice_service_requests_total"], "endpoint", "status", "org")
        assert counted[("/api/v1/voices", "200", tenant.org_id)] == 1.0
        assert counted[("/api/v1/voices", "401", "none")] == 1.0


@dataclass
class Node:
    """`serve --workers 2`, and the directory where its workers keep their values."""

    server: Server
    shared: Path

    def files(self, kind: str) -> set[int]:
        """The pids of the processes with `kind` files ("counter", "gauge_livesum")."""
        return {int(file.stem.rsplit("_", 1)[1]) for file in self.shared.glob(f"{kind}_*.db")}

    def scrape_matches_the_log(self, scrapes: int = 4) -> None:
        """Whichever worker answers a scrape, it counts every row written before its own."""
        answers = [httpx.get(f"{self.server.root}/metrics") for _ in range(scrapes)]
        with sqlite3.connect(self.server.database) as database:
            rows = database.execute("SELECT request_id, path, status FROM request_log").fetchall()
        for index, answer in enumerate(answers):
            later = {a.headers["x-request-id"] for a in answers[index:]}
            # The paths here (/api/v1/voices, /readyz, /metrics) are their own templates.
            logged = Counter((path, str(status)) for id_, path, status in rows if id_ not in later)
            counted = by(samples(answer.text)["voice_service_requests_total"], "endpoint", "status")
            assert counted == {key: float(n) for key, n in logged.items()}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    if not REDIS_URL:
        pytest.skip("several workers share their rate limits in Redis")
    data_dir = tmp_path_factory.mktemp("node")
    with running_server(data_dir, workers=2, redis_url=REDIS_URL) as server:
        yield Node(server, data_dir / "metrics" / str(server.pid))  # where `serve` put them


def test_workers_of_one_node_report_their_counts_summed(node: Node) -> None:
    key = {"Authorization": f"Bearer {node.server.api_key}"}
    # Until each worker has answered some requests: the kernel picks the worker of each
    # connection, and concurrent requests keep both busy.
    with ThreadPoolExecutor(8) as clients:
        for _ in range(50):
            answers = clients.map(
                lambda n: httpx.get(f"{node.server.base_url}/voices", headers=key if n % 2 else {}),
                range(8),
            )
            assert {answer.status_code for answer in answers} <= {200, 401, 429}
            if len(node.files("counter")) == 2:
                break
    assert len(node.files("counter")) == 2, "one worker answered every request"
    node.scrape_matches_the_log()


def test_a_killed_workers_gauges_go_and_its_counts_stay(node: Node) -> None:
    assert httpx.get(f"{node.server.base_url}/voices").status_code == 401  # something counted
    killed = next(iter(node.files("counter") & node.files("gauge_livesum")))  # a worker with counts
    os.kill(killed, signal.SIGKILL)
    # uvicorn's supervisor starts a replacement; a scrape then drops the dead one's gauges
    # (once the supervisor has reaped it).
    deadline = time.monotonic() + 120
    while killed in node.files("gauge_livesum") or len(node.files("gauge_livesum")) < 2:
        assert time.monotonic() < deadline, "the killed worker's gauges stayed"
        with contextlib.suppress(httpx.TransportError):
            httpx.get(f"{node.server.root}/metrics")
        time.sleep(0.2)
    node.scrape_matches_the_log()
