"""A provider's replicas failing between this node and its upstream: refused, reset mid-body,
stalled, slow, 500, garbage JSON, the wrong content type.

The good replica is a real second node (node B) behind a FaultProxy; the bad one is
`FaultyUpstream`, also behind a FaultProxy (to reset a connection at a chunk it holds). Where
a replica stalls, the retry goes to the upstream itself under another path, which answers at
once: within a timeout short enough for a quick test, node B might not on a loaded machine. Each
test builds its own node from its own providers file, so replica states and metrics start
fresh, and speaks to node B with a key of its own, so node B's rows for that key are its
requests alone. What happened is read from the servers: node B's request log and usage, the
faulty upstream's record, this node's metrics, log row, usage and /readyz; never timings.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from tests.cluster.faultproxy import FaultProxy, Mode
from tests.helpers.app import Tenant, Tenants, fresh_database, make_settings, running
from tests.helpers.faulty_upstream import (
    AUDIO,
    Answer,
    FaultyUpstream,
    faulty_upstream,
    refusing_port,
)
from tests.helpers.live import LiveServer, serving
from tests.helpers.speech_clips import write_audio
from tests.helpers.upstreams import providers_file
from tests.helpers.voices import JOE_KEY
from tests.helpers.waiting import eventually
from voice_service.app import create_app
from voice_service.audio.encode import FORMATS, OutputFormat
from voice_service.books.idempotency.keys import RELEASED_HEADER, REPLAYED_HEADER
from voice_service.core.ids import catalogue_voice_id
from voice_service.core.models import RequestLogEntry, UsageRecord
from voice_service.inference.engines import Engines
from voice_service.inference.providers.provider import Provider
from voice_service.inference.providers.replicas import LEFT_OUT_SECONDS
from voice_service.inference.providers.wire import speech_bytes
from voice_service.settings import Settings
from voice_service.web.context import AppContext

T = TypeVar("T")
KEY_ENV = "FAULTS_NODE_B_KEY"
PASSWORD = "hunter2-in-the-url"
TEXT = "Hello there."
# The providers file's timeout_seconds: short where a test has a replica stall or trickle,
# and otherwise one no replica meets, on a machine however loaded, while a test holds it.
TIMEOUT = 2.0
PATIENT = 60.0
FAILED = Answer(500, "text/plain", (b"internal error",))
SPEECH = "/v1/audio/speech"
TRANSCRIPTIONS = "/v1/audio/transcriptions"


# -- servers, one of each for the module ----------------------------------------------------


@pytest.fixture(scope="module")
def node_b(tmp_path_factory: pytest.TempPathFactory, engines: Engines) -> Iterator[LiveServer]:
    directory = tmp_path_factory.mktemp("node-b")
    with (
        fresh_database(directory) as url,
        serving(make_settings(directory, url), engines) as server,
    ):
        yield server


@pytest.fixture(scope="module")
def proxy_b(node_b: LiveServer) -> Iterator[FaultProxy]:
    proxy = FaultProxy(("127.0.0.1", int(node_b.root.rsplit(":", 1)[1])), "node-b")
    yield proxy
    proxy.close()


@pytest.fixture(scope="module")
def module_upstream() -> Iterator[FaultyUpstream]:
    with faulty_upstream() as upstream:
        yield upstream


@pytest.fixture(scope="module")
def proxy_up(module_upstream: FaultyUpstream) -> Iterator[FaultProxy]:
    proxy = FaultProxy(("127.0.0.1", int(module_upstream.root.rsplit(":", 1)[1])), "faulty")
    yield proxy
    proxy.close()


@pytest.fixture(scope="module")
def refusing() -> Iterator[int]:
    with refusing_port() as port:
        yield port


@pytest.fixture
def upstream(
    module_upstream: FaultyUpstream, proxy_up: FaultProxy, proxy_b: FaultProxy
) -> Iterator[FaultyUpstream]:
    """The faulty upstream with nothing queued or recorded, both proxies forwarding."""
    module_upstream.reset()
    yield module_upstream
    module_upstream.reset()
    proxy_up.set_mode("forward")
    proxy_b.set_mode("forward")


@dataclass(frozen=True)
class Urls:
    faulty: str  # the faulty upstream, through its FaultProxy
    second: str  # the faulty upstream again, straight and under another path
    node_b: str  # node B, through its FaultProxy
    refusing: str

    @property
    def faulty_with_credentials(self) -> str:
        return self.faulty.replace("http://", f"http://operator:{PASSWORD}@")


@pytest.fixture(scope="module")
def urls(
    module_upstream: FaultyUpstream, proxy_up: FaultProxy, proxy_b: FaultProxy, refusing: int
) -> Urls:
    return Urls(
        f"http://127.0.0.1:{proxy_up.port}/v1",
        f"{module_upstream.root}/second/v1",
        f"http://127.0.0.1:{proxy_b.port}/v1",
        f"http://127.0.0.1:{refusing}/v1",
    )


@pytest.fixture
def node_b_tenant(node_b: LiveServer, monkeypatch: pytest.MonkeyPatch) -> Tenant:
    """This test's key at node B, which the providers file names."""
    tenant = node_b.tenant()
    monkeypatch.setenv(KEY_ENV, tenant.secret)
    return tenant


@dataclass(frozen=True)
class Clip:
    path: Path
    seconds: float


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory, engines: Engines) -> Clip:
    """Speech for node B's Whisper to hear, made by the suite's Piper."""
    pcm = engines.chunk_speaker(JOE_KEY, None)("The quick brown fox jumps over the lazy dog.")
    path = write_audio(tmp_path_factory.mktemp("clip") / "clip.wav", pcm, "wav-s16")
    return Clip(path, pcm.duration_seconds)


@pytest.fixture(scope="module")
def no_local_engines(tmp_path_factory: pytest.TempPathFactory) -> Engines:
    return Engines.load(
        Settings(data_dir=tmp_path_factory.mktemp("none"), tts_engines="", stt_engines="")
    )


# -- this node ------------------------------------------------------------------------------


def provider(
    name: str,
    *urls: str,
    speech: bool = True,
    transcription: bool = False,
    timeout: float = PATIENT,
    key: bool = True,
) -> str:
    """One [[provider]] of the OpenAI kind, with node B's key unless `key` is false."""
    lines = [
        "[[provider]]",
        f'name = "{name}"',
        'kind = "openai"',
        f"base_urls = {json.dumps(list(urls))}",
        f"timeout_seconds = {timeout}",
    ]
    if key:
        lines.append(f'api_key_env = "{KEY_ENV}"')
    if speech:
        lines += ["[provider.speech]", f'voices = [{{ voice = "alloy", name = "Joe ({name})" }}]']
    if transcription:
        lines += ["[provider.transcription]", 'languages = ["*"]']
    return "\n".join(lines) + "\n"


@dataclass
class Node:
    """This node, its client, and a tenant of its own."""

    client: httpx.AsyncClient
    app: FastAPI
    tenant: Tenant

    @property
    def context(self) -> AppContext:
        context: AppContext = self.app.state.context
        return context

    def provider(self, name: str) -> Provider:
        return next(p for p in self.context.providers.all if p.name == name)

    async def speak(
        self, provider: str, text: str = TEXT, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        return await self.client.post(
            "/text-to-speech",
            headers={**self.tenant.headers, **(headers or {})},
            json={"voice_id": catalogue_voice_id(f"{provider}:alloy"), "text": text},
        )

    async def transcribe(self, clip: Clip) -> httpx.Response:
        return await self.client.post(
            "/speech-to-text",
            headers=self.tenant.headers,
            files={"file": ("clip.wav", clip.path.read_bytes())},
            data={"language": "en"},
        )

    async def readyz(self) -> tuple[int, dict[str, Any]]:
        response = await self.client.get("http://testserver/readyz")
        return response.status_code, response.json()

    async def states(self, provider: str) -> list[str]:
        _, body = await self.readyz()
        return [replica["state"] for replica in body["providers"][provider]["replicas"]]

    def outcomes(self, provider: str) -> dict[str, float]:
        return outcomes(self.app, provider)

    async def log_row(self, request_id: str) -> RequestLogEntry:
        for _ in range(300):  # rows are written in batches, a moment after the answer
            async with self.context.sessions() as session:
                row = await session.get(RequestLogEntry, request_id)
            if row is not None:
                return row
            await asyncio.sleep(0.1)
        raise AssertionError(f"no log row for {request_id}")

    async def units(self, request_id: str) -> list[int]:
        async with self.context.sessions() as session:
            rows = await session.scalars(select(UsageRecord).filter_by(request_id=request_id))
            return [row.units for row in rows]


NodeOf = Callable[..., AbstractAsyncContextManager[Node]]


@pytest.fixture
def node_of(tmp_path: Path, database_url: str, engines: Engines, node_b_tenant: Tenant) -> NodeOf:
    """This node serving the providers file `toml`, with the suite's engines or `local`."""

    @asynccontextmanager
    async def start(
        toml: str, local: Engines = engines, **overrides: object
    ) -> AsyncIterator[Node]:
        path = providers_file(tmp_path / "providers.toml", toml)
        names = {} if local is engines else {"tts_engines": "", "stt_engines": ""}
        settings = make_settings(tmp_path, database_url, providers_file=path, **names, **overrides)
        app = create_app(settings, local)
        async with running(app) as client:
            yield Node(client, app, await Tenants(settings).create())

    return start


class FakeClock:
    """The replicas' clock, moved by the test: no test waits out the 30 s."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def outcomes(app: FastAPI, provider: str) -> dict[str, float]:
    """voice_service_provider_requests_total for `provider`, by outcome."""
    exposition = app.state.context.metrics.exposition().decode()
    return {
        sample.labels["outcome"]: sample.value
        for family in text_string_to_metric_families(exposition)
        if family.name == "voice_service_provider_requests"
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels["provider"] == provider
    }


def node_b_calls(node_b: LiveServer, tenant: Tenant) -> list[tuple[str, int, list[int]]]:
    """Node B's log rows for `tenant`'s key (path, status) with the units billed for each."""

    async def work(session: AsyncSession) -> list[tuple[str, int, list[int]]]:
        rows = await session.scalars(
            select(RequestLogEntry)
            .filter_by(key_id=tenant.key_id)
            .order_by(RequestLogEntry.created_at)
        )
        calls = []
        for row in rows:
            usage = await session.scalars(select(UsageRecord).filter_by(request_id=row.request_id))
            calls.append((row.path, row.status, [record.units for record in usage]))
        return calls

    return asyncio.run(node_b.tenants.run(work))


async def until(probe: Callable[[], T], patience: float = 30.0) -> T:
    """`probe`'s first truthy value, polled in a thread (it may block, as node B's do)."""
    return await asyncio.to_thread(eventually, probe, patience)


async def node_b_answered(
    node_b: LiveServer, tenant: Tenant, count: int
) -> list[tuple[str, int, list[int]]]:
    """Node B's calls for `tenant`, once there are `count` (a stream's row comes at its end)."""

    def probe() -> list[tuple[str, int, list[int]]] | None:
        calls = node_b_calls(node_b, tenant)
        return calls if len(calls) >= count else None

    calls = await until(probe)
    assert calls is not None, f"node B did not log {count} requests"
    return calls


async def reset_after_first_chunk(
    upstream: FaultyUpstream, proxy: FaultProxy, request: Coroutine[Any, Any, httpx.Response]
) -> httpx.Response:
    """`request`'s answer, its connection to the upstream reset once one chunk is out."""
    sent: asyncio.Task[httpx.Response] = asyncio.create_task(request)
    await until(lambda: upstream.requests and upstream.requests[0].chunks_sent == 1)
    await asyncio.to_thread(proxy.set_mode, "reset")
    upstream.release()
    return await sent


# -- speech ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_requests_go_to_the_replica_with_fewest_in_flight(
    node_of: NodeOf, urls: Urls, upstream: FaultyUpstream, node_b: LiveServer, node_b_tenant: Tenant
) -> None:
    async with node_of(provider("speakers", urls.faulty, urls.node_b)) as node:
        upstream.will(Answer(hold_after=0))
        first = asyncio.create_task(node.speak("speakers"))
        await until(lambda: len(upstream.requests) == 1)
        _, ready = await node.readyz()
        replicas = ready["providers"]["speakers"]["replicas"]
        assert [(r["state"], r["in_flight"]) for r in replicas] == [("up", 1), ("up", 0)]
        second = await node.speak("speakers")  # the first replica has one in flight
        assert second.status_code == 200, second.text
        assert len(upstream.requests) == 1
        assert await node_b_answered(node_b, node_b_tenant, 1) == [(SPEECH, 200, [len(TEXT)])]
        upstream.release()
        answered = await first
        assert answered.status_code == 200 and answered.content == AUDIO
        assert second.content != AUDIO
        assert node.outcomes("speakers") == {"ok": 2}


# What the first replica does -> the FaultProxy's mode in front of it, and how many requests
# reached the faulty upstream itself.
FAILURES_BEFORE_AUDIO: dict[str, tuple[Answer | None, Mode, int]] = {
    "refused": (None, "refuse", 0),
    "500": (Answer(500, "application/json", (b'{"error": {"message": "down"}}',)), "forward", 1),
    "wrong content type": (Answer(200, "text/html", (b"<html>Sign in</html>",)), "forward", 1),
    "no audio": (Answer(200, "audio/mpeg", ()), "forward", 1),
}


@pytest.mark.anyio
@pytest.mark.parametrize("fault", list(FAILURES_BEFORE_AUDIO))
async def test_a_replica_failing_before_any_audio_is_retried_once_on_another(
    fault: str,
    node_of: NodeOf,
    urls: Urls,
    upstream: FaultyUpstream,
    proxy_up: FaultProxy,
    node_b: LiveServer,
    node_b_tenant: Tenant,
) -> None:
    answer, mode, reached = FAILURES_BEFORE_AUDIO[fault]
    async with node_of(provider("speakers", urls.faulty, urls.node_b)) as node:
        if answer is not None:
            upstream.will(answer)
        proxy_up.set_mode(mode)
        response = await node.speak("speakers")
        assert response.status_code == 200, response.text
        assert len(upstream.requests) == reached
        assert await node_b_answered(node_b, node_b_tenant, 1) == [(SPEECH, 200, [len(TEXT)])]
        assert await node.units(response.headers["x-request-id"]) == [len(TEXT)]
        assert node.outcomes("speakers") == {"error": 1, "ok": 1}
        assert await node.states("speakers") == ["failing", "up"]


@pytest.mark.anyio
async def test_a_stalled_replica_is_retried_on_another(
    node_of: NodeOf, urls: Urls, upstream: FaultyUpstream
) -> None:
    # The second replica is the upstream itself, under another path (see the docstring).
    async with node_of(provider("speakers", urls.faulty, urls.second, timeout=TIMEOUT)) as node:
        upstream.will(Answer(hold_after=0), Answer(chunks=(AUDIO, AUDIO)))
        response = await node.speak("speakers")
        assert response.status_code == 200, response.text
        assert response.content == AUDIO * 2
        assert [r.path for r in upstream.requests] == [SPEECH, "/second" + SPEECH]
        assert await node.units(response.headers["x-request-id"]) == [len(TEXT)]
        assert node.outcomes("speakers") == {"timeout": 1, "ok": 1}
        assert await node.states("speakers") == ["failing", "up"]


@pytest.mark.anyio
async def test_a_slow_stream_that_never_pauses_past_the_timeout_succeeds(
    node_of: NodeOf, urls: Urls, upstream: FaultyUpstream, node_b: LiveServer, node_b_tenant: Tenant
) -> None:
    async with node_of(provider("speakers", urls.faulty, urls.node_b, timeout=TIMEOUT)) as node:
        upstream.will(Answer(chunks=(AUDIO,) * 6, gap=TIMEOUT / 4))
        response = await node.speak("speakers")
        assert response.status_code == 200, response.text
        assert response.content == AUDIO * 6
        seconds = upstream.requests[0].seconds
        assert seconds is not None and seconds > TIMEOUT  # longer in all than the timeout
        assert node.outcomes("speakers") == {"ok": 1}
        assert await node.units(response.headers["x-request-id"]) == [len(TEXT)]
        assert await asyncio.to_thread(node_b_calls, node_b, node_b_tenant) == []


def test_a_stream_reset_midway_is_cut_off_logged_502_and_not_billed(
    tmp_path: Path,
    database_url: str,
    engines: Engines,
    urls: Urls,
    upstream: FaultyUpstream,
    proxy_up: FaultProxy,
    node_b: LiveServer,
    node_b_tenant: Tenant,
) -> None:
    path = providers_file(
        tmp_path / "providers.toml", provider("speakers", urls.faulty, urls.node_b)
    )
    settings = make_settings(tmp_path, database_url, providers_file=path)
    upstream.will(Answer(chunks=(AUDIO, AUDIO), hold_after=1))
    with serving(settings, engines) as node:
        tenant = node.tenant()
        received = bytearray()
        with (
            httpx.Client(timeout=60) as client,
            client.stream(
                "POST",
                f"{node.root}/api/v1/text-to-speech/stream",
                json={"text": TEXT, "voice_id": catalogue_voice_id("speakers:alloy")},
                headers=tenant.headers,
            ) as response,
        ):
            assert response.status_code == 200
            request_id = response.headers["x-request-id"]
            chunks = response.iter_raw()
            while len(received) < len(AUDIO):  # the upstream's first chunk, passed on
                received += next(chunks)
            proxy_up.set_mode("reset")  # while the upstream holds its second
            with pytest.raises(httpx.RemoteProtocolError):  # no final chunk: cut off
                received.extend(b"".join(chunks))
        assert bytes(received) == AUDIO
        row = node.log_row(request_id)
        assert (row.status, row.error_code, row.bytes_sent) == (502, "PROVIDER_ERROR", len(AUDIO))
        assert node.usage_units(request_id) == []
        assert outcomes(node.app, "speakers") == {"error": 1}
        assert len(upstream.requests) == 1
        assert node_b_calls(node_b, node_b_tenant) == []  # audio had gone out: no retry


@pytest.mark.anyio
async def test_a_file_whose_replica_resets_midway_is_retried_as_nothing_was_sent(
    node_of: NodeOf,
    urls: Urls,
    upstream: FaultyUpstream,
    proxy_up: FaultProxy,
    node_b: LiveServer,
    node_b_tenant: Tenant,
) -> None:
    async with node_of(provider("speakers", urls.faulty, urls.node_b)) as node:
        upstream.will(Answer(chunks=(AUDIO, AUDIO), hold_after=1))
        response = await reset_after_first_chunk(upstream, proxy_up, node.speak("speakers"))
        assert response.status_code == 200, response.text
        assert await node_b_answered(node_b, node_b_tenant, 1) == [(SPEECH, 200, [len(TEXT)])]
        assert node.outcomes("speakers") == {"error": 1, "ok": 1}


@pytest.mark.anyio
async def test_when_every_replica_fails_the_answer_is_502_naming_the_provider_not_its_secrets(
    node_of: NodeOf,
    urls: Urls,
    upstream: FaultyUpstream,
    proxy_b: FaultProxy,
    node_b: LiveServer,
    node_b_tenant: Tenant,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Credentials in a URL exclude api_key_env; node B is refused before it could want a key.
    toml = provider("speakers", urls.faulty_with_credentials, urls.node_b, key=False)
    async with node_of(toml) as node:
        upstream.will(FAILED)
        proxy_b.set_mode("refuse")
        response = await node.speak("speakers")
        assert response.status_code == 502
        error = response.json()["error"]
        assert error["code"] == "PROVIDER_ERROR"
        assert "'speakers'" in error["message"]
        for secret in (PASSWORD, "operator", node_b_tenant.secret, "127.0.0.1"):
            assert secret not in error["message"]
        row = await node.log_row(error["request_id"])
        assert (row.status, row.error_code) == (502, "PROVIDER_ERROR")
        assert await node.units(error["request_id"]) == []
        assert node.outcomes("speakers") == {"error": 2}
        assert len(upstream.requests) == 1
        assert await asyncio.to_thread(node_b_calls, node_b, node_b_tenant) == []
        status, ready = await node.readyz()
        assert status == 200  # the local engines still speak
        assert [r["url"] for r in ready["providers"]["speakers"]["replicas"]] == [
            urls.faulty,
            urls.node_b,
        ]
        assert PASSWORD not in json.dumps(ready)
    failures = [r.getMessage() for r in caplog.records if "provider speakers" in r.getMessage()]
    assert len(failures) == 2 and PASSWORD not in caplog.text


@pytest.mark.anyio
async def test_a_request_is_retried_at_most_once(
    node_of: NodeOf, urls: Urls, upstream: FaultyUpstream, node_b: LiveServer, node_b_tenant: Tenant
) -> None:
    # Refused, then a 500 from the next replica: node B, third, is never asked.
    async with node_of(provider("speakers", urls.refusing, urls.faulty, urls.node_b)) as node:
        upstream.will(FAILED)
        response = await node.speak("speakers")
        assert response.status_code == 502
        assert "answered 500" in response.json()["error"]["message"]
        assert node.outcomes("speakers") == {"error": 2}
        assert len(upstream.requests) == 1
        assert await asyncio.to_thread(node_b_calls, node_b, node_b_tenant) == []
        assert await node.states("speakers") == ["failing", "failing", "up"]


async def leave_out_first_replica(node: Node, upstream: FaultyUpstream, name: str) -> None:
    """Five failures in a row at the faulty upstream, each request served by node B."""
    upstream.will(*[FAILED] * 5)
    for number in range(1, 6):
        response = await node.speak(name)
        assert response.status_code == 200, response.text
        expected = "left out" if number == 5 else "failing"
        assert await node.states(name) == [expected, "up"]


@pytest.mark.anyio
async def test_five_failures_in_a_row_leave_a_replica_out_for_30_seconds(
    node_of: NodeOf, urls: Urls, upstream: FaultyUpstream, node_b: LiveServer, node_b_tenant: Tenant
) -> None:
    async with node_of(provider("speakers", urls.faulty, urls.node_b)) as node:
        clock = FakeClock()
        node.provider("speakers").replicas.clock = clock
        await leave_out_first_replica(node, upstream, "speakers")
        assert (await node.speak("speakers")).status_code == 200
        clock.now += LEFT_OUT_SECONDS - 0.1
        assert await node.states("speakers") == ["left out", "up"]
        assert (await node.speak("speakers")).status_code == 200
        assert len(upstream.requests) == 5  # neither of the last two went there
        assert len(await node_b_answered(node_b, node_b_tenant, 7)) == 7
        assert node.outcomes("speakers") == {"error": 5, "ok": 7}
        status, ready = await node.readyz()
        assert status == 200 and ready["providers"]["speakers"]["can_serve"] is True


@pytest.mark.anyio
async def test_after_30_seconds_one_trial_request_brings_the_replica_back(
    node_of: NodeOf, urls: Urls, upstream: FaultyUpstream, node_b: LiveServer, node_b_tenant: Tenant
) -> None:
    async with node_of(provider("speakers", urls.faulty, urls.node_b)) as node:
        clock = FakeClock()
        node.provider("speakers").replicas.clock = clock
        await leave_out_first_replica(node, upstream, "speakers")
        clock.now += LEFT_OUT_SECONDS
        upstream.will(Answer(hold_after=0))
        trial = asyncio.create_task(node.speak("speakers"))
        await until(lambda: len(upstream.requests) == 6)
        # While the trial runs the replica stays left out: the next request goes to node B.
        assert await node.states("speakers") == ["left out", "up"]
        assert (await node.speak("speakers")).status_code == 200
        assert len(upstream.requests) == 6
        upstream.release()
        answered = await trial
        assert answered.status_code == 200 and answered.content == AUDIO
        assert await node.states("speakers") == ["up", "up"]
        assert len(await node_b_answered(node_b, node_b_tenant, 6)) == 6
        assert node.outcomes("speakers") == {"error": 5, "ok": 7}


@pytest.mark.anyio
async def test_a_failed_trial_leaves_the_replica_out_for_30_seconds_more(
    node_of: NodeOf, urls: Urls, upstream: FaultyUpstream
) -> None:
    async with node_of(provider("speakers", urls.faulty, urls.node_b)) as node:
        clock = FakeClock()
        node.provider("speakers").replicas.clock = clock
        await leave_out_first_replica(node, upstream, "speakers")
        clock.now += LEFT_OUT_SECONDS
        upstream.will(FAILED)
        assert (await node.speak("speakers")).status_code == 200  # the trial, then node B
        assert len(upstream.requests) == 6
        clock.now += LEFT_OUT_SECONDS - 0.1
        assert await node.states("speakers") == ["left out", "up"]
        assert (await node.speak("speakers")).status_code == 200
        assert len(upstream.requests) == 6
        assert node.outcomes("speakers") == {"error": 6, "ok": 7}


@pytest.mark.anyio
async def test_only_failures_in_a_row_leave_a_replica_out(
    node_of: NodeOf, urls: Urls, upstream: FaultyUpstream
) -> None:
    async with node_of(provider("lonely", urls.faulty)) as node:
        upstream.will(*[FAILED] * 4, Answer(), *[FAILED] * 4)
        statuses = [(await node.speak("lonely")).status_code for _ in range(9)]
        assert statuses == [502] * 4 + [200] + [502] * 4
        assert await node.states("lonely") == ["failing"]
        assert node.outcomes("lonely") == {"error": 8, "ok": 1}


@pytest.mark.anyio
async def test_a_provider_whose_replicas_are_all_left_out_answers_502_and_the_node_stays_ready(
    node_of: NodeOf, urls: Urls, upstream: FaultyUpstream
) -> None:
    async with node_of(provider("lonely", urls.faulty)) as node:
        upstream.will(*[FAILED] * 5)
        for _ in range(5):
            assert (await node.speak("lonely")).status_code == 502
        response = await node.speak("lonely")
        assert response.status_code == 502
        error = response.json()["error"]
        assert error["code"] == "PROVIDER_ERROR" and "'lonely'" in error["message"]
        assert "left out" in error["message"]
        assert len(upstream.requests) == 5  # the sixth was not sent
        assert await node.units(error["request_id"]) == []
        status, ready = await node.readyz()
        assert status == 200 and ready["checks"]["providers"] is True  # the local engines
        assert ready["providers"]["lonely"]["can_serve"] is False
        assert await node.states("lonely") == ["left out"]


@pytest.mark.anyio
async def test_readyz_stays_200_while_another_provider_can_serve(
    node_of: NodeOf,
    urls: Urls,
    upstream: FaultyUpstream,
    proxy_b: FaultProxy,
    no_local_engines: Engines,
) -> None:
    toml = provider("speakers", urls.faulty) + provider("backup", urls.node_b)
    async with node_of(toml, no_local_engines) as node:
        upstream.will(*[FAILED] * 5)
        for _ in range(5):
            assert (await node.speak("speakers")).status_code == 502
        status, ready = await node.readyz()
        assert status == 200 and ready["checks"]["providers"] is True
        assert await node.states("speakers") == ["left out"]
        assert await node.states("backup") == ["up"]
        proxy_b.set_mode("refuse")
        for _ in range(5):
            assert (await node.speak("backup")).status_code == 502
        status, ready = await node.readyz()
        assert status == 503 and ready["checks"]["providers"] is False
        assert await node.states("backup") == ["left out"]


# -- transcription --------------------------------------------------------------------------


def listeners(*urls: str, timeout: float = PATIENT) -> str:
    return provider("listeners", *urls, speech=False, transcription=True, timeout=timeout)


@pytest.mark.anyio
async def test_a_transcription_reset_midway_is_retried_once_on_another_replica(
    node_of: NodeOf,
    urls: Urls,
    upstream: FaultyUpstream,
    proxy_up: FaultProxy,
    node_b: LiveServer,
    node_b_tenant: Tenant,
    clip: Clip,
) -> None:
    async with node_of(listeners(urls.faulty, urls.node_b)) as node:
        upstream.will(Answer(200, "application/json", (b'{"text": "the', b' quick"}'), 1))
        response = await reset_after_first_chunk(upstream, proxy_up, node.transcribe(clip))
        assert response.status_code == 200, response.text
        assert "fox" in response.json()["text"].lower()  # node B's Whisper heard it
        calls = await node_b_answered(node_b, node_b_tenant, 1)
        assert [(path, status) for path, status, _ in calls] == [(TRANSCRIPTIONS, 200)]
        assert await node.units(response.json()["request_id"]) == [math.ceil(clip.seconds)]
        assert node.outcomes("listeners") == {"error": 1, "ok": 1}
        assert len(upstream.requests) == 1


# What a transcription replica answers -> what the 502 says it did.
BAD_TRANSCRIPTS: dict[str, tuple[Answer, str]] = {
    "500": (Answer(500, "application/json", (b'{"error": {"message": "down"}}',)), "answered 500"),
    "garbage JSON": (
        Answer(200, "application/json", (b'{"text": "the quick',)),
        "answered JSON that does not parse",
    ),
    "wrong content type": (
        Answer(200, "text/html", (b'{"text": "the quick brown fox"}',)),
        "answered text/html, not JSON",
    ),
}


@pytest.mark.anyio
@pytest.mark.parametrize("fault", list(BAD_TRANSCRIPTS))
async def test_a_bad_transcription_answer_fails_the_replica_and_is_not_billed(
    fault: str, node_of: NodeOf, urls: Urls, upstream: FaultyUpstream, clip: Clip
) -> None:
    # The one replica: no other to retry on, so the failure itself is the answer.
    answer, said = BAD_TRANSCRIPTS[fault]
    async with node_of(listeners(urls.faulty)) as node:
        upstream.will(answer)
        response = await node.transcribe(clip)
        assert response.status_code == 502
        error = response.json()["error"]
        assert error["code"] == "PROVIDER_ERROR"
        assert "'listeners'" in error["message"] and said in error["message"]
        row = await node.log_row(error["request_id"])
        assert (row.status, row.error_code) == (502, "PROVIDER_ERROR")
        assert await node.units(error["request_id"]) == []
        assert node.outcomes("listeners") == {"error": 1}
        assert await node.states("listeners") == ["failing"]
        assert [r.path for r in upstream.requests] == [TRANSCRIPTIONS]


TRANSCRIPT = Answer(200, "application/json", (b'{"text": "the quick brown fox"}',))


@pytest.mark.anyio
async def test_a_stalled_transcription_replica_is_retried_on_another(
    node_of: NodeOf, urls: Urls, upstream: FaultyUpstream, clip: Clip
) -> None:
    # As for speech, the second replica is the upstream itself, answering at once.
    async with node_of(listeners(urls.faulty, urls.second, timeout=TIMEOUT)) as node:
        upstream.will(Answer(hold_after=0), TRANSCRIPT)
        response = await node.transcribe(clip)
        assert response.status_code == 200, response.text
        assert response.json()["text"] == "the quick brown fox"
        assert [r.path for r in upstream.requests] == [TRANSCRIPTIONS, "/second" + TRANSCRIPTIONS]
        assert node.outcomes("listeners") == {"timeout": 1, "ok": 1}


# -- hostile answers: without end, quoting credentials, nested past any parser -------------

ENDLESS = Answer(chunks=(AUDIO * 157,), endless=True)  # 64 kB a chunk, never done


@pytest.mark.anyio
async def test_an_endless_speech_answer_is_cut_off_at_what_its_text_can_take_502_unbilled(
    node_of: NodeOf, urls: Urls, upstream: FaultyUpstream
) -> None:
    # Straight to the upstream (no proxy between), so it sees the node hang up.
    async with node_of(provider("lonely", urls.second)) as node:
        upstream.will(ENDLESS)
        response = await node.speak("lonely")
        assert response.status_code == 502
        error = response.json()["error"]
        assert error["code"] == "PROVIDER_ERROR" and "bytes of audio" in error["message"]
        limit = speech_bytes(len(TEXT), FORMATS[OutputFormat.MP3])
        # What it sent before the node stopped reading: the bound, and the sockets' buffers.
        await until(lambda: upstream.requests[0].finished is not None)
        assert limit < upstream.requests[0].bytes_sent < limit + 16 * 1024 * 1024
        row = await node.log_row(error["request_id"])
        assert (row.status, row.error_code) == (502, "PROVIDER_ERROR")
        assert await node.units(error["request_id"]) == []
        assert node.outcomes("lonely") == {"error": 1}


@pytest.mark.anyio
async def test_an_answer_too_large_to_keep_releases_its_idempotency_key_and_says_so(
    node_of: NodeOf, urls: Urls, upstream: FaultyUpstream
) -> None:
    async with node_of(provider("lonely", urls.faulty), idempotent_answer_max_bytes=1000) as node:
        upstream.will(Answer(chunks=(AUDIO,) * 5), Answer(chunks=(AUDIO,) * 5))
        key = {"Idempotency-Key": "big-answer"}
        first = await node.speak("lonely", headers=key)
        assert first.status_code == 200 and first.content == AUDIO * 5
        assert first.headers[RELEASED_HEADER] == "answer over 1000 bytes"
        retry = await node.speak("lonely", headers=key)  # runs again: nothing was kept
        assert retry.status_code == 200 and REPLAYED_HEADER not in retry.headers
        assert len(upstream.requests) == 2
        # Billed once all the same: the key remembers that its request was.
        assert await node.units(first.headers["x-request-id"]) == [len(TEXT)]
        assert await node.units(retry.headers["x-request-id"]) == []


def quoting_credentials(status: int) -> Answer:
    """A refusal that quotes the Authorization header it got, as OpenAI's 401 does."""

    def body(headers: dict[str, str]) -> bytes:
        said = f"Incorrect API key provided: {headers.get('authorization')}"
        return json.dumps({"error": {"message": said}}).encode()

    return Answer(status, "application/json", quoting=body)


@pytest.mark.anyio
@pytest.mark.parametrize("status", [401, 400])
async def test_an_upstream_refusal_reaches_the_tenant_in_our_words_and_the_log_redacted(
    status: int,
    node_of: NodeOf,
    urls: Urls,
    upstream: FaultyUpstream,
    node_b_tenant: Tenant,
    caplog: pytest.LogCaptureFixture,
) -> None:
    toml = provider("keyed", urls.faulty) + provider(
        "in-url", urls.faulty_with_credentials, key=False
    )
    async with node_of(toml) as node:
        upstream.will(*[quoting_credentials(status)] * 3)
        basic = base64.b64encode(f"operator:{PASSWORD}".encode()).decode()
        openai = await node.client.post(  # the OpenAI-compatible API, in its own shape
            "http://testserver/v1/audio/speech",
            headers=node.tenant.headers,
            json={"model": "tts-1", "voice": catalogue_voice_id("keyed:alloy"), "input": TEXT},
        )
        answers = [("keyed", openai.json()["error"]["message"], openai.status_code)]
        for name in ("keyed", "in-url"):
            response = await node.speak(name)
            answers.append((name, response.json()["error"]["message"], response.status_code))
        for name, message, answered in answers:
            assert answered == (400 if status == 400 else 502)
            assert f"'{name}' refused the request ({status})" in message
            assert "Incorrect API key" not in message
            for secret in (node_b_tenant.secret, PASSWORD, basic):
                assert secret not in message and secret not in caplog.text
        sent = [r.headers["authorization"] for r in upstream.requests]
        assert sent == [f"Bearer {node_b_tenant.secret}"] * 2 + [f"Basic {basic}"]
    refusals = [r.getMessage() for r in caplog.records if "refused a request" in r.getMessage()]
    assert len(refusals) == 3
    assert all("Incorrect API key provided: Bearer [redacted]" in r for r in refusals[:2])
    assert "Incorrect API key provided: Basic [redacted]" in refusals[2]


@pytest.mark.anyio
async def test_json_nested_past_any_parser_is_a_bad_answer_and_the_next_replica_serves(
    node_of: NodeOf, urls: Urls, upstream: FaultyUpstream, clip: Clip
) -> None:
    async with node_of(listeners(urls.faulty, urls.second)) as node:
        upstream.will(Answer(200, "application/json", (b"[" * 100_000,)), TRANSCRIPT)
        response = await node.transcribe(clip)
        assert response.status_code == 200, response.text
        assert response.json()["text"] == "the quick brown fox"
        assert node.outcomes("listeners") == {"error": 1, "ok": 1}
        assert await node.states("listeners") == ["failing", "up"]


@pytest.mark.anyio
async def test_a_refusal_nested_past_any_parser_is_a_502_not_a_500(
    node_of: NodeOf, urls: Urls, upstream: FaultyUpstream, clip: Clip
) -> None:
    async with node_of(listeners(urls.faulty)) as node:
        upstream.will(Answer(401, "application/json", (b'{"error": ' + b"[" * 60_000,)))
        response = await node.transcribe(clip)
        assert response.status_code == 502, response.text
        error = response.json()["error"]
        assert error["code"] == "PROVIDER_ERROR" and "refused the request (401)" in error["message"]
        assert await node.units(error["request_id"]) == []
