"""Real clusters on this machine: `voice-service serve --workers 2` nodes on one PostgreSQL
database and one Redis db, each reached through a `FaultProxy` the test steers; a mixed
client load that records every answer; and the checks of those answers against the
request log and the usage table, read directly (not through the proxy)."""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import httpx
import pytest
import redis
from sqlalchemy import func, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, create_async_engine

from tests.cluster.faultproxy import FaultProxy, LoopThread
from tests.helpers.app import TEST_PEPPER, fresh_database
from tests.helpers.ports import free_port
from tests.helpers.voices import JOE
from voice_service.core.models import RequestLogEntry, UsageRecord
from voice_service.kit.db import run_in_transaction
from voice_service.settings import Settings
from voice_service.tenancy import service as tenancy
from voice_service.tenancy.keys import SecretHasher

T = TypeVar("T")

SERVER_URL = os.environ.get("VOICE_SERVICE_DATABASE_URL", "")
REDIS_URL = os.environ.get("VOICE_SERVICE_REDIS_URL", "")
requires_backends = pytest.mark.skipif(
    not (SERVER_URL.startswith("postgresql") and REDIS_URL),
    reason="cluster tests need VOICE_SERVICE_DATABASE_URL (PostgreSQL) and "
    "VOICE_SERVICE_REDIS_URL (the PostgreSQL pass of .ci/run)",
)

NODES = 2
WORKERS = 2
DB_TIMEOUT = 2.0
REDIS_TIMEOUT = 2.0
READYZ_LIMIT = 3.0
# What a loaded 2-core CI machine may add to a bound the service promises.
MARGIN = 5.0
# Whisper + Piper load in every worker, all of them at once on 2 cores.
START_TIMEOUT = 240.0
SETTLE_TIMEOUT = 90.0
# Long enough that a heartbeat held up on a loaded machine is not taken for a dead node.
JOB_LEASE_SECONDS = 8
DB_POOL_SIZE = 3
DB_MAX_OVERFLOW = 2

UNKNOWN_VOICE = "voice_000000000000000000000000"
BAD_KEY = "vs_" + "x" * 40


# --- the database, read directly ---------------------------------------------------------


class Database:
    """The test database, on a connection of the test's own (not through the proxy)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._thread = LoopThread("cluster-db")
        self._engine: AsyncEngine = create_async_engine(url, pool_size=2)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._thread.run(self._engine.dispose(), timeout=10)
        self._thread.stop()

    def scalar(self, sql: str, **params: Any) -> Any:
        return self.rows(sql, **params)[0][0]

    def rows(self, sql: str, **params: Any) -> list[tuple[Any, ...]]:
        async def work() -> list[tuple[Any, ...]]:
            async with self._engine.connect() as connection:
                result = await connection.execute(text(sql), params)
                return [tuple(row) for row in result.all()]

        return self.run(work())

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        """Run `coroutine` on this database's event loop (where its engine lives)."""
        return self._thread.run(coroutine, timeout)

    def log_statuses(self, request_ids: Sequence[str]) -> dict[str, list[int]]:
        """Every request-log status recorded for each of `request_ids` (a list, so that a
        row written twice would show)."""
        statement = select(RequestLogEntry.request_id, RequestLogEntry.status).where(
            RequestLogEntry.request_id.in_(list(request_ids))
        )
        found: dict[str, list[int]] = {}
        for request_id, status in self._select(statement):
            found.setdefault(request_id, []).append(status)
        return found

    def usage(self) -> dict[str, list[tuple[str, int, str]]]:
        """Every usage row: request id -> [(endpoint, units, key id)]."""
        statement = select(
            UsageRecord.request_id, UsageRecord.endpoint, UsageRecord.units, UsageRecord.key_id
        )
        found: dict[str, list[tuple[str, int, str]]] = {}
        for request_id, endpoint, units, key_id in self._select(statement):
            found.setdefault(request_id, []).append((endpoint, units, key_id))
        return found

    def orphan_usage(self) -> list[tuple[str, int | None]]:
        """Usage rows whose request has no 2xx log row: (request id, log status or None)."""
        statement = (
            select(UsageRecord.request_id, func.max(RequestLogEntry.status))
            .outerjoin(RequestLogEntry, RequestLogEntry.request_id == UsageRecord.request_id)
            .group_by(UsageRecord.request_id)
        )
        return [
            (request_id, status)
            for request_id, status in self._select(statement)
            if status is None or not 200 <= status < 300
        ]

    def _select(self, statement: Any) -> list[tuple[Any, ...]]:
        async def work() -> list[tuple[Any, ...]]:
            async with self._engine.connect() as connection:
                return [tuple(row) for row in (await connection.execute(statement)).all()]

        return self.run(work())

    @contextmanager
    def table_locked(self, table: str) -> Iterator[None]:
        """An open transaction holding ACCESS EXCLUSIVE on `table` until the block ends."""
        connection: AsyncConnection = self.run(self._engine.connect().start())
        try:
            self.run(connection.execute(text(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")))
            yield
        finally:
            with contextlib.suppress(Exception):
                self.run(connection.rollback(), timeout=10)
            self.run(connection.close(), timeout=10)

    def wait_for_lock_waiters(self, table: str, timeout: float = 120) -> list[int]:
        """Poll closely: a waiter gives up after the nodes' database timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if waiters := self.lock_waiters(table):
                return waiters
            time.sleep(0.02)
        raise AssertionError(f"nothing waited for the lock on {table} (waited {timeout:g} s)")

    def lock_waiters(self, table: str) -> list[int]:
        """Backends of this database waiting for a lock in a statement that names `table`."""
        return [
            int(pid)
            for (pid,) in self.rows(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' "
                "AND query ILIKE :pattern",
                pattern=f"%{table}%",
            )
        ]

    def terminate(self, pid: int) -> None:
        self.rows("SELECT pg_terminate_backend(:pid)", pid=pid)


# --- nodes --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ready:
    status: int | None  # None: no answer in time
    body: dict[str, Any]
    elapsed: float

    @property
    def warnings(self) -> list[str]:
        return list(self.body.get("warnings") or [])


class Node:
    """One `serve --workers N` process group with its own data dir and log files."""

    def __init__(self, name: str, env: dict[str, str], directory: Path, workers: int) -> None:
        self.name = name
        self.env = env
        self.directory = directory
        self.workers = workers
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.first: dict[str, str] = {}
        self.starts = 0
        self.worker_starts = 0  # worker processes started since the node's last start

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/api/v1"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def log(self) -> Path:
        return self.directory / f"serve-{self.starts}.log"

    @property
    def out(self) -> Path:
        return self.directory / f"serve-{self.starts}.out"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start `serve` (returns at once; see `wait_started`)."""
        self.starts += 1
        self.worker_starts = self.workers
        (self.directory / "data").mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "voice_service", "serve"]
        command += ["--workers", str(self.workers), "--port", str(self.port), "--json"]
        with self.out.open("wb") as stdout, self.log.open("wb") as stderr:
            self.process = subprocess.Popen(  # noqa: S603
                command,
                env=self.env,
                cwd=self.directory,  # no developer's .env is read
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,  # its own process group, killed whole
            )

    def wait_started(self, timeout: float = START_TIMEOUT) -> dict[str, str]:
        """The JSON `serve` printed, once every worker has started and /readyz says 200."""
        deadline = time.monotonic() + timeout
        self.first = self._first_json(deadline)
        self.wait_workers_ready(deadline - time.monotonic())
        return self.first

    def _first_json(self, deadline: float) -> dict[str, str]:
        while time.monotonic() < deadline:
            printed = self.out.read_text()
            with contextlib.suppress(json.JSONDecodeError):
                parsed: dict[str, str] = json.loads(printed)
                return parsed
            if not self.alive():
                raise AssertionError(f"{self.name} exited: {self.diagnostics()}")
            time.sleep(0.2)
        raise AssertionError(f"{self.name} printed no JSON: {self.diagnostics()}")

    def worker_pids(self) -> list[int]:
        """The live worker processes (children of `serve`, not multiprocessing's tracker)."""
        workers = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            state, ppid = fields[0], int(fields[1])
            if ppid == self.pid and state != "Z" and b"spawn_main" in cmdline:
                workers.append(int(entry.name))
        return workers

    def serving_workers(self) -> list[int]:
        """Workers holding an accepted connection of this node's port: answering a request
        right now (the clients here do not keep connections alive)."""
        accepted = _established_inodes(self.port)
        serving = []
        for pid in self.worker_pids():
            try:
                links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
            except OSError:
                continue
            if any(link in accepted for link in links):
                serving.append(pid)
        return serving

    def kill_serving_worker(self, timeout: float = START_TIMEOUT) -> int:
        """SIGKILL a worker in the middle of a request; uvicorn's supervisor starts another."""
        deadline = time.monotonic() + timeout
        while not (serving := self.serving_workers()):
            if time.monotonic() > deadline:
                raise AssertionError(f"no worker of {self.name} served: {self.diagnostics()}")
            time.sleep(0.02)
        self.kill_worker(serving[0])
        return serving[0]

    def kill_worker(self, pid: int) -> None:
        os.kill(pid, signal.SIGKILL)
        self.worker_starts += 1

    def kill(self) -> None:
        """SIGKILL the whole node: supervisor and workers at once, nothing drains."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is None or not self.alive():
            self.kill()  # its workers may outlive a dead supervisor
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        self.kill()

    def wait_workers_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Every worker started since the node's start has finished its start-up (the
        supervisor restarts killed ones), `workers` of them are alive, and /readyz is 200."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise AssertionError(f"{self.name} exited: {self.diagnostics()}")
            started = self.log.read_text(errors="replace").count("Application startup complete")
            if (
                started >= self.worker_starts
                and len(self.worker_pids()) == self.workers
                and self.readyz(timeout=5).status == 200
            ):
                return
            time.sleep(0.3)
        raise AssertionError(f"{self.name} never became ready: {self.diagnostics()}")

    def readyz(self, timeout: float = READYZ_LIMIT + MARGIN) -> Ready:
        started = time.monotonic()
        try:
            response = httpx.get(f"{self.root}/readyz", timeout=timeout)
        except httpx.TransportError:
            return Ready(None, {}, time.monotonic() - started)
        elapsed = time.monotonic() - started
        try:
            body = response.json()
        except ValueError:
            body = {"raw": response.text}
        return Ready(response.status_code, body if isinstance(body, dict) else {}, elapsed)

    def diagnostics(self, lines: int = 40) -> str:
        code = None if self.process is None else self.process.poll()
        return f"exit code {code}; stderr tail:\n{self.log_tail(lines)}"

    def log_tail(self, lines: int = 40) -> str:
        """The last `lines` lines of stderr, less the frames of tracebacks."""
        try:
            text_ = self.log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        kept = [line for line in text_.splitlines() if not line.startswith((" ", "\t"))]
        return "\n".join(kept[-lines:])


def _established_inodes(port: int) -> set[str]:
    """The socket inodes (as /proc/PID/fd links name them) of established TCP connections
    whose local port is `port`."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].rsplit(":", 1)[1], 16)
        if local_port == port and fields[3] == "01":  # TCP_ESTABLISHED
            inodes.add(f"socket:[{fields[9]}]")
    return inodes


# --- the cluster --------------------------------------------------------------------------


@dataclass(frozen=True)
class Key:
    id: str
    secret: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secret}"}


class Cluster:
    """`nodes` nodes on a fresh database (through `pg`) and Redis db `redis_db` (through
    `redis`), with `settings` besides the harness's (names as `Settings` has them). Use as a
    context manager: everything is torn down, whatever happened."""

    def __init__(
        self,
        directory: Path,
        redis_db: int,
        nodes: int = NODES,
        *,
        settings: dict[str, str] | None = None,
    ) -> None:
        self.directory = directory
        self.redis_db = redis_db
        self.node_count = nodes
        self.settings = settings or {}
        self.nodes: list[Node] = []
        self._stack = ExitStack()

    def __enter__(self) -> Cluster:
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()

    def _start(self) -> None:
        server = make_url(SERVER_URL)
        url = self._stack.enter_context(fresh_database(self.directory))
        self.db = Database(url)
        self._stack.callback(self.db.close)
        redis_target = urlsplit(REDIS_URL)
        redis_host, redis_port = redis_target.hostname or "127.0.0.1", redis_target.port or 6379
        with redis.Redis(host=redis_host, port=redis_port, db=self.redis_db) as client:
            client.flushdb()
        self.pg = FaultProxy((server.host or "127.0.0.1", server.port or 5432), "postgresql")
        self._stack.callback(self.pg.close)
        self.redis = FaultProxy((redis_host, redis_port), "redis")
        self._stack.callback(self.redis.close)
        proxied = make_url(url).set(host="127.0.0.1", port=self.pg.port)
        self.admin_settings = Settings(
            data_dir=self.directory / "admin",
            database_url=url,
            key_pepper=TEST_PEPPER,
            redis_url=None,
        )
        for index in range(self.node_count):
            env = node_env(
                self.directory / f"node{index}" / "data",
                proxied.render_as_string(hide_password=False),
                f"redis://127.0.0.1:{self.redis.port}/{self.redis_db}",
                **self.settings,
            )
            node = Node(f"node{index}", env, self.directory / f"node{index}", WORKERS)
            self.nodes.append(node)
            self._stack.callback(node.stop)
        for node in self.nodes:  # together, as a rollout would
            node.start()
        firsts = [node.wait_started() for node in self.nodes]
        made = [first for first in firsts if "api_key" in first]
        assert len(made) == 1, firsts
        self.org_id = made[0]["org_id"]
        self.first_key = made[0]["api_key"]

    def create_key(self, rate_limit: int | None = None) -> Key:
        """A new key of the first organization, made as the admin CLI makes one."""

        async def work(session: AsyncSession) -> Key:
            created = await tenancy.create_key(
                session, SecretHasher(TEST_PEPPER.encode()), self.org_id, None, rate_limit
            )
            return Key(created.key.id, created.secret)

        return self.db.run(run_in_transaction(self.admin_settings, work))

    def ensure_healthy(self) -> None:
        """Both proxies forward, every node is up (restarted if it died) with all its workers
        ready, and no node warns (Redis is back for every process it asked)."""
        self.pg.set_mode("forward")
        self.redis.set_mode("forward")
        for node in self.nodes:
            if not node.alive():
                node.kill()  # what is left of its group
                node.start()
        for node in self.nodes:
            node.wait_workers_ready()
        for node in self.nodes:
            wait_for(functools.partial(calm, node), 60, f"{node.name} kept warning")

    def diagnostics(self) -> str:
        return "\n".join(f"--- {node.name}: {node.diagnostics()}" for node in self.nodes)


def calm(node: Node) -> bool:
    """Ready without warnings, several times over."""
    answers = [node.readyz() for _ in range(4)]  # fresh connections reach both workers
    return all(answer.status == 200 and not answer.warnings for answer in answers)


def node_env(data_dir: Path, database_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("VOICE_")}
    env.update(
        {
            "VOICE_SERVICE_DATA_DIR": str(data_dir),
            "VOICE_SERVICE_DATABASE_URL": database_url,
            "VOICE_SERVICE_REDIS_URL": redis_url,
            "VOICE_SERVICE_KEY_PEPPER": TEST_PEPPER,
            "VOICE_SERVICE_POOL_SIZE": "1",
            "VOICE_SERVICE_INFERENCE_TIMEOUT_SECONDS": "3600",
            "VOICE_SERVICE_DB_TIMEOUT_SECONDS": str(DB_TIMEOUT),
            "VOICE_SERVICE_REDIS_TIMEOUT_SECONDS": str(REDIS_TIMEOUT),
            "VOICE_SERVICE_DB_POOL_SIZE": str(DB_POOL_SIZE),
            "VOICE_SERVICE_DB_MAX_OVERFLOW": str(DB_MAX_OVERFLOW),
            "VOICE_SERVICE_DB_POOL_TIMEOUT_SECONDS": str(DB_TIMEOUT),
            "VOICE_SERVICE_CLUSTER_NODES": str(NODES),
            # A killed node's transcription job is taken over within seconds.
            "VOICE_SERVICE_JOB_LEASE_SECONDS": str(JOB_LEASE_SECONDS),
        }
    )
    env.update({f"VOICE_SERVICE_{name.upper()}": value for name, value in extra.items()})
    return env


def wait_for(condition: Callable[[], bool], timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.3)
    raise AssertionError(f"{message} (waited {timeout:g} s)")


# --- client load --------------------------------------------------------------------------

Kind = Literal["tts", "stt", "voices", "bad-voice", "bad-key"]
MIXED: tuple[Kind, ...] = ("tts", "voices", "stt", "bad-voice", "tts", "bad-key")
TEXTS = ("Hello there.", "Good morning to you.", "See you soon.")


@dataclass(frozen=True)
class Billing:
    endpoint: str
    units: int


@dataclass(frozen=True)
class Call:
    """One request as the client saw it."""

    kind: Kind
    node: str
    billing: Billing | None  # what a success of it must bill
    expected_status: int
    status: int | None = None  # None: no answer (the connection failed or timed out)
    request_id: str | None = None
    error_code: str | None = None
    envelope_id: str | None = None
    content_type: str = ""
    elapsed: float = 0.0
    failure: str = ""

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@dataclass(frozen=True)
class Clip:
    wav: bytes
    samples: int
    rate: int

    @property
    def units(self) -> int:
        return max(1, math.ceil(Fraction(self.samples, self.rate)))


@dataclass
class Workload:
    """Builds and sends the mixed requests: short TTS, a short STT clip, GET /voices, an
    unknown voice (404) and a bad key (401)."""

    key: Key
    clip: Clip
    timeout: float = 120.0
    counter: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def send(
        self,
        client: httpx.Client,
        node: Node,
        kind: Kind,
        key: Key | None = None,
        timeout: float | None = None,
    ) -> Call:
        with self._lock:
            self.counter += 1
            text_ = TEXTS[self.counter % len(TEXTS)]
        billing = {
            "tts": Billing("text-to-speech", len(text_)),
            "stt": Billing("speech-to-text", self.clip.units),
        }.get(kind)
        call = Call(kind, node.name, billing, {"bad-voice": 404, "bad-key": 401}.get(kind, 200))
        headers = (key or self.key).headers
        if kind == "bad-key":
            headers = {"Authorization": f"Bearer {BAD_KEY}"}
        started = time.monotonic()
        try:
            response = client.send(self._request(client, node, kind, text_, headers, timeout))
        except httpx.HTTPError as exc:
            return replace(call, elapsed=time.monotonic() - started, failure=repr(exc))
        return observe(call, response, time.monotonic() - started)

    def send_one(
        self, node: Node, kind: Kind, key: Key | None = None, timeout: float | None = None
    ) -> Call:
        with new_client() as client:
            return self.send(client, node, kind, key, timeout)

    def _request(
        self,
        client: httpx.Client,
        node: Node,
        kind: Kind,
        text_: str,
        headers: dict[str, str],
        timeout: float | None,
    ) -> httpx.Request:
        extensions = {"timeout": httpx.Timeout(timeout or self.timeout).as_dict()}
        url = node.base_url
        if kind == "voices":
            return client.build_request(
                "GET", f"{url}/voices", headers=headers, extensions=extensions
            )
        if kind == "stt":
            return client.build_request(
                "POST",
                f"{url}/speech-to-text",
                headers=headers,
                files={"file": ("clip.wav", self.clip.wav, "audio/wav")},
                data={"language": "en"},
                extensions=extensions,
            )
        voice = UNKNOWN_VOICE if kind == "bad-voice" else JOE
        return client.build_request(
            "POST",
            f"{url}/text-to-speech",
            headers=headers,
            json={"text": text_, "voice_id": voice},
            extensions=extensions,
        )


def observe(call: Call, response: httpx.Response, elapsed: float) -> Call:
    code = envelope_id = None
    if response.status_code >= 400:
        with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
            error = response.json()["error"]
            code, envelope_id = error["code"], error["request_id"]
    return replace(
        call,
        status=response.status_code,
        request_id=response.headers.get("x-request-id"),
        error_code=code,
        envelope_id=envelope_id,
        content_type=response.headers.get("content-type", ""),
        elapsed=elapsed,
    )


def new_client() -> httpx.Client:
    # A new connection per request: the kernel hands each to any worker of the node.
    return httpx.Client(limits=httpx.Limits(max_keepalive_connections=0))


class Load:
    """`threads` clients sending `kinds` in turn to every node until stopped."""

    def __init__(
        self,
        workload: Workload,
        nodes: Sequence[Node],
        threads: int,
        kinds: Sequence[Kind] = MIXED,
        pace: float = 0.0,
        timeout: float | None = None,
    ) -> None:
        self.pace = pace  # seconds between one thread's requests
        self.timeout = timeout
        self.workload = workload
        self.nodes = list(nodes)
        self.kinds = list(kinds)
        self.calls: list[Call] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._run, args=(i,), name=f"load-{i}", daemon=True)
            for i in range(threads)
        ]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join((self.timeout or self.workload.timeout) + 10)

    def successes(self) -> int:
        with self._lock:
            return sum(call.ok for call in self.calls)

    def snapshot(self) -> list[Call]:
        with self._lock:
            return list(self.calls)

    def _run(self, offset: int) -> None:
        step = offset
        with new_client() as client:
            while not self._stop.is_set():
                node = self.nodes[step % len(self.nodes)]
                kind = self.kinds[(step // len(self.nodes) + offset) % len(self.kinds)]
                call = self.workload.send(client, node, kind, timeout=self.timeout)
                with self._lock:
                    self.calls.append(call)
                step += 1
                self._stop.wait(self.pace)


# --- checks -------------------------------------------------------------------------------


def wait_for_log_rows(
    db: Database, calls: Sequence[Call], timeout: float = SETTLE_TIMEOUT
) -> dict[str, list[int]]:
    """The log statuses of every answered call, once each has its row (nodes may still be
    replaying a spool), or what there is when `timeout` runs out."""
    ids = [call.request_id for call in calls if call.request_id]
    deadline = time.monotonic() + timeout
    while True:
        found = db.log_statuses(ids)
        if len(found) == len(set(ids)) or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def accounting_problems(db: Database, calls: Sequence[Call], key: Key | None) -> list[str]:
    """What is wrong in the log and usage tables about the calls the client saw answered,
    and any usage row in the database without a 2xx log row."""
    answered = [call for call in calls if call.status is not None]
    problems = [f"no X-Request-ID on {call}" for call in answered if not call.request_id]
    logged = wait_for_log_rows(db, answered)
    usage = db.usage()
    for call in answered:
        if not call.request_id:
            continue
        statuses = logged.get(call.request_id, [])
        if statuses != [call.status]:
            problems.append(f"{call.request_id} ({call.kind}, {call.status}): log {statuses}")
        billed = usage.get(call.request_id, [])
        if call.ok and call.billing is not None:
            want = [(call.billing.endpoint, call.billing.units)]
            got = [(endpoint, units) for endpoint, units, _ in billed]
            if got != want or (key is not None and billed[0][2] != key.id):
                problems.append(f"{call.request_id} ({call.kind}): usage {billed}, want {want}")
        elif billed:
            problems.append(f"{call.request_id} ({call.kind}, {call.status}): billed {billed}")
    problems += [
        f"usage row {request_id} without a 2xx log row (log status {status})"
        for request_id, status in db.orphan_usage()
    ]
    return problems


def envelope_problems(calls: Sequence[Call]) -> list[str]:
    """Answered errors that are not the error envelope naming the response's request id."""
    return [
        f"{call.kind} on {call.node}: {call.status} {call.error_code} "
        f"envelope id {call.envelope_id} header id {call.request_id}"
        for call in calls
        if call.status is not None
        and call.status >= 400
        and (call.error_code is None or call.envelope_id != call.request_id)
    ]


def summary(calls: Sequence[Call]) -> str:
    counts: dict[str, int] = {}
    for call in calls:
        label = f"{call.kind}:{call.status if call.status is not None else 'no answer'}"
        counts[label] = counts.get(label, 0) + 1
    return ", ".join(f"{label}={count}" for label, count in sorted(counts.items()))


def report(problems: Sequence[str], calls: Sequence[Call], limit: int = 25) -> str:
    shown = "\n".join(problems[:limit])
    more = f"\n... and {len(problems) - limit} more" if len(problems) > limit else ""
    return f"{len(problems)} problems; calls: {summary(calls)}\n{shown}{more}"
