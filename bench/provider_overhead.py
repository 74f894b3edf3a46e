"""Figure 14: what the gateway adds on the provider path.

The same requests go straight to an upstream and through a light node (no local engines)
whose providers file routes to that upstream, in one run on one machine, alternated so that
drift and the neighbours' load hit both alike:
- transcription: a short clip to faster-whisper-server (PyPI, on the packaged Whisper base)
  at /v1/audio/transcriptions, against the node's /api/v1/speech-to-text; median latency one
  at a time, and throughput with 8 requests in flight;
- speech: time to the first streamed byte of /v1/audio/speech from an upstream Voice Service
  node (its local engines), against the same through the light node.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.procs import (
    PYTHON,
    START_TIMEOUT_S,
    Server,
    _first_json,
    _wait_ready,
    cpu_seconds,
    free_port,
    service_env,
)
from voice_service.core.ids import catalogue_voice_id
from voice_service.inference.providers.table import voice_key

CONCURRENCY = 8
# faster-whisper-server transcribes inside its event loop, so a worker process takes one
# request at a time: one worker per request in flight, one thread each, so that eight
# processes share the 2 cores without OpenMP threads waiting on each other (one worker of
# two threads did far worse on the busy 2-core machine).
FWS_WORKERS = CONCURRENCY
# int8 as our own Whisper runs on a CPU (the model's float16 would run as float32), one
# thread a worker.
CPU_MODEL_OPTIONS = "{compute_type: int8, cpu_threads: 1}"
TRANSCRIBER = "fws"
SPEAKER = "upstream-node"
SPEAKER_VOICE = "alloy"  # the upstream's OpenAI name for its first English voice
SPEAKER_KEY_ENV = "BENCH_UPSTREAM_NODE_KEY"
# Eight transcriptions in flight on a busy 2-core machine take tens of seconds each; the
# node's own inference deadline is not what this figure measures.
TIMEOUT_S = 600


@dataclass(frozen=True)
class Upstream:
    """The Voice Service node that speaks: its root URL and an authorization header."""

    root: str
    headers: dict[str, str]


@dataclass(frozen=True)
class _Counts:
    sequential: int  # transcriptions one at a time, per path
    rounds: int  # batches of 8 in flight, per path
    per_client: int  # requests each of the 8 clients sends in a batch
    first_bytes: int  # speech requests, per path
    warm_clients: int  # clients that send a request each, per path, before any is timed
    upstream_workers: int  # faster-whisper-server's processes

    @classmethod
    def make(cls, quick: bool) -> _Counts:
        if quick:  # two upstream processes: the suite checks the figures' shape, not their value
            return cls(
                sequential=1, rounds=1, per_client=1, first_bytes=1, warm_clients=1,
                upstream_workers=2,
            )  # fmt: skip
        return cls(
            sequential=7, rounds=3, per_client=2, first_bytes=15, warm_clients=CONCURRENCY,
            upstream_workers=FWS_WORKERS,
        )  # fmt: skip


@dataclass(frozen=True)
class _Route:
    """Where a transcription goes, with what: straight to the upstream or through the node."""

    url: str
    headers: dict[str, str]
    fields: dict[str, str]

    def transcribe(self, client: httpx.Client, clip: bytes) -> str:
        files = {"file": ("clip.mp3", clip, "audio/mpeg")}
        response = client.post(self.url, files=files, data=self.fields)
        response.raise_for_status()
        text: str = response.json()["text"]
        return " ".join(text.split())

    def clients(self) -> list[httpx.Client]:
        return [httpx.Client(headers=self.headers, timeout=TIMEOUT_S) for _ in range(CONCURRENCY)]


def measure(
    quick: bool, work: Path, upstream: Upstream, clip: bytes, text: str, model: Path
) -> dict[str, Any]:
    """Both halves of the figure; `clip` is a short English MP3, `text` what is spoken,
    `model` the CTranslate2 Whisper faster-whisper-server loads."""
    counts = _Counts.make(quick)
    started = servers(model, work, upstream, workers=counts.upstream_workers)
    with started as (fws, node, node_headers):
        straight = _Route(
            f"{fws.root}/v1/audio/transcriptions",
            {},
            # What the node sends for a transcription with a language and nothing else.
            {"model": "whisper-1", "language": "en", "response_format": "json", "temperature": "0"},
        )
        through = _Route(f"{node.root}/api/v1/speech-to-text", node_headers, {"language": "en"})
        result = _transcription(counts, clip, (fws, straight), (node, through))
        result |= _first_bytes(counts, text, upstream, node.root, node_headers)
    return result


# --- transcription ----------------------------------------------------------------------


def _transcription(
    counts: _Counts, clip: bytes, straight: tuple[Server, _Route], through: tuple[Server, _Route]
) -> dict[str, Any]:
    servers = (straight[0], through[0])
    routes = {"straight": straight[1], "through": through[1]}
    pools = {name: route.clients() for name, route in routes.items()}
    heard: set[str] = set()
    times: dict[str, list[float]] = {name: [] for name in routes}
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in routes}
    try:
        # Each path warmed first: the upstream's workers load Whisper on their first
        # request, and the connections later requests reuse are opened. --quick warms one.
        for name, route in routes.items():
            heard |= _batch(route, pools[name][: counts.warm_clients], clip, 1)[1]
        for _ in range(counts.sequential):
            for name, route in routes.items():
                started = time.perf_counter()
                heard.add(route.transcribe(pools[name][0], clip))
                times[name].append(time.perf_counter() - started)
        for _ in range(counts.rounds):
            for name, route in routes.items():
                measured, texts = _round(servers, route, pools[name], clip, counts.per_client)
                rounds[name].append(measured)
                heard |= texts
    finally:
        for clients in pools.values():
            for client in clients:
                client.close()
    if len(heard) != 1:  # both paths must have given the upstream the same work
        raise RuntimeError(f"the transcripts differ: {sorted(heard)}")
    return {**_summary(times, rounds), "transcript": heard.pop(), "clip_bytes": len(clip)}


def _summary(
    times: dict[str, list[float]], rounds: dict[str, list[dict[str, float]]]
) -> dict[str, Any]:
    # The node's CPU beyond what it spends idle (measured while the straight rounds ran).
    idle_cores = _total(rounds["straight"], "node_cpu_s") / _total(rounds["straight"], "seconds")
    forwarding_s = _total(rounds["through"], "node_cpu_s")
    forwarding_s -= idle_cores * _total(rounds["through"], "seconds")
    per_request_s = forwarding_s / _total(rounds["through"], "requests")
    pairs = zip(times["straight"], times["through"], strict=True)
    return {
        "stt_straight_s": statistics.median(times["straight"]),
        "stt_through_s": statistics.median(times["through"]),
        "stt_paired_difference_s": statistics.median(b - a for a, b in pairs),
        "stt_straight_rps": _rps(rounds["straight"]),
        "stt_through_rps": _rps(rounds["through"]),
        "node_cpu_ms_per_transcription": 1000 * per_request_s,
        "node_idle_cores": idle_cores,
        "fws_workers": FWS_WORKERS,
        "sequential_s": times,
        "rounds": rounds,
    }


def _round(
    servers: tuple[Server, Server],
    route: _Route,
    clients: list[httpx.Client],
    clip: bytes,
    per_client: int,
) -> tuple[dict[str, float], set[str]]:
    """One batch in flight, with the CPU the upstream and the node spent meanwhile."""
    before = [cpu_seconds(server.pid) for server in servers]
    seconds, heard = _batch(route, clients, clip, per_client)
    upstream_cpu, node_cpu = (cpu_seconds(s.pid) - b for s, b in zip(servers, before, strict=True))
    measured = {"requests": len(clients) * per_client, "seconds": seconds,
                "upstream_cpu_s": upstream_cpu, "node_cpu_s": node_cpu}  # fmt: skip
    return measured, heard


def _batch(
    route: _Route, clients: list[httpx.Client], clip: bytes, per_client: int
) -> tuple[float, set[str]]:
    """Seconds for `per_client` transcriptions from each client at once, and what was heard."""

    def send(client: httpx.Client) -> set[str]:
        return {route.transcribe(client, clip) for _ in range(per_client)}

    with ThreadPoolExecutor(len(clients)) as pool:
        started = time.perf_counter()
        heard: set[str] = set().union(*pool.map(send, clients))
        return time.perf_counter() - started, heard


def _rps(rounds: list[dict[str, float]]) -> float:
    return _total(rounds, "requests") / _total(rounds, "seconds")


def _total(rounds: list[dict[str, float]], key: str) -> float:
    return sum(r[key] for r in rounds)


# --- speech -----------------------------------------------------------------------------


def _first_bytes(
    counts: _Counts, text: str, upstream: Upstream, node_root: str, node_headers: dict[str, str]
) -> dict[str, Any]:
    through_voice = catalogue_voice_id(voice_key(SPEAKER, SPEAKER_VOICE))
    paths = {
        "straight": (_client(upstream.root, upstream.headers), SPEAKER_VOICE),
        "through": (_client(node_root, node_headers), through_voice),
    }
    seconds: dict[str, list[float]] = {name: [] for name in paths}
    try:
        for client, voice in paths.values():  # warm both: connections, the node's voice lookup
            _first_byte(client, voice, text)
        for _ in range(counts.first_bytes):
            for name, (client, voice) in paths.items():
                seconds[name].append(_first_byte(client, voice, text))
    finally:
        for client, _ in paths.values():
            client.close()
    pairs = zip(seconds["straight"], seconds["through"], strict=True)
    return {
        "first_byte_straight_ms": 1000 * statistics.median(seconds["straight"]),
        "first_byte_through_ms": 1000 * statistics.median(seconds["through"]),
        "first_byte_overhead_ms": 1000 * statistics.median(b - a for a, b in pairs),
        "first_byte_s": seconds,
        "speech_text": text,
    }


def _client(root: str, headers: dict[str, str]) -> httpx.Client:
    return httpx.Client(base_url=root, headers=headers, timeout=TIMEOUT_S)


def _first_byte(client: httpx.Client, voice: str, text: str) -> float:
    """Seconds to the first byte of /v1/audio/speech streamed; the rest is read, so the
    upstream finishes (and bills) each request before the next starts."""
    body = {"model": "tts-1", "voice": voice, "input": text, "response_format": "mp3"}
    started = time.perf_counter()
    first = None
    with client.stream("POST", "/v1/audio/speech", json=body) as response:
        response.raise_for_status()
        for chunk in response.iter_raw():
            if chunk and first is None:
                first = time.perf_counter() - started
    if first is None:
        raise RuntimeError(f"{client.base_url} answered no audio")
    return first


# --- the servers ------------------------------------------------------------------------


@contextmanager
def servers(
    model: Path,
    work: Path,
    upstream: Upstream | None,
    model_options: str = CPU_MODEL_OPTIONS,
    workers: int = FWS_WORKERS,
) -> Iterator[tuple[Server, Server, dict[str, str]]]:
    """faster-whisper-server (`workers` processes, each loading Whisper with the YAML
    mapping `model_options`) and the light node (speaking through `upstream`, if any),
    started side by side, until the block ends: both, and the header of the node's first
    key."""
    with ExitStack() as stack:
        fws, fws_log = _start_faster_whisper_server(model, work, model_options, workers)
        stack.callback(fws.stop)
        node, out_path, err_path = _start_light_node(work, fws.root, upstream)
        stack.callback(node.stop)
        deadline = time.monotonic() + START_TIMEOUT_S
        first = _first_json(out_path, node.process, deadline)
        _wait_ready(node, deadline, err_path)
        while not _answers(f"{fws.root}/health"):
            if fws.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"faster-whisper-server: {fws_log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield fws, node, {"Authorization": f"Bearer {first['api_key']}"}


def _start_faster_whisper_server(
    model: Path, work: Path, model_options: str, workers: int
) -> tuple[Server, Path]:
    """faster-whisper-server from its CLI on `model`, and its log."""
    if importlib.util.find_spec("faster_whisper_server") is None:
        raise RuntimeError("faster-whisper-server is not installed (a dev dependency)")
    # Its config file, for what its command line cannot say. "whisper-1" is the model a
    # request names when it names none (fws reads `model_name`, not `model`).
    config = work / "faster-whisper-server.yaml"
    config.write_text(
        f"models:\n  - name: whisper-1\n    path: {json.dumps(str(model))}\n"
        f"    model_options: {model_options}\n",
        encoding="utf-8",
    )
    port = free_port()
    log_path = work / "faster-whisper-server.log"
    log = log_path.open("wb")
    command = [PYTHON, "-m", "faster_whisper_server", "--config", str(config)]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    # A long keep-alive: connections idle while the other path is measured are reused
    # afterwards, as in steady traffic, not closed under a request.
    command += ["--workers", str(workers), "--timeout-keep-alive", str(TIMEOUT_S)]
    # Offline; the paths that find its packages (and a GPU's libraries) pass through.
    passed = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH")
    env = {name: os.environ[name] for name in passed if name in os.environ}
    env["HF_HUB_OFFLINE"] = "1"
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    return Server(process, f"http://127.0.0.1:{port}", [log]), log_path


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def _start_light_node(
    work: Path, fws_root: str, upstream: Upstream | None
) -> tuple[Server, Path, Path]:
    """`voice-service serve` without local engines, its providers file naming faster-whisper-
    server for transcription and the upstream node, if any, for speech; its stdout and
    stderr."""
    data_dir = work / "light-node"
    data_dir.mkdir()
    providers = data_dir / "providers.toml"
    providers.write_text(_providers_toml(fws_root, upstream), encoding="utf-8")
    env = service_env(data_dir) | {
        "VOICE_SERVICE_PROVIDERS_FILE": str(providers),
        "VOICE_SERVICE_STT_ENGINES": "",
        "VOICE_SERVICE_TTS_ENGINES": "",
        "VOICE_SERVICE_INFERENCE_TIMEOUT_SECONDS": str(TIMEOUT_S),
        # The first key's limit: still checked on every request, never reached here.
        "VOICE_SERVICE_DEFAULT_RATE_LIMIT": "10000000",
    }
    if upstream is not None:
        env[SPEAKER_KEY_ENV] = upstream.headers["Authorization"].removeprefix("Bearer ")
    port = free_port()
    out_path, err_path = data_dir / "serve.out", data_dir / "serve.err"
    out, err = out_path.open("wb"), err_path.open("wb")
    command = [PYTHON, "-m", "voice_service", "serve", "--port", str(port), "--json"]
    process = subprocess.Popen(command, env=env, cwd=data_dir, stdout=out, stderr=err)
    return Server(process, f"http://127.0.0.1:{port}", [out, err]), out_path, err_path


def _providers_toml(fws_root: str, upstream: Upstream | None) -> str:
    transcriber = f"""
[[provider]]
name = "{TRANSCRIBER}"
kind = "openai"
base_urls = ["{fws_root}/v1"]
timeout_seconds = {TIMEOUT_S}

[provider.transcription]
languages = ["*"]
"""
    if upstream is None:
        return transcriber
    return f"""{transcriber}
[[provider]]
name = "{SPEAKER}"
kind = "openai"
base_urls = ["{upstream.root}/v1"]
api_key_env = "{SPEAKER_KEY_ENV}"
timeout_seconds = {TIMEOUT_S}

[provider.speech]
voices = [{{ voice = "{SPEAKER_VOICE}", name = "Joe (upstream node)", language = "en" }}]
"""
