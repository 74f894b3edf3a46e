"""Processes for the benchmark: the service as a user starts it, the bare baseline server,
and what /proc says about them (CPU time, resident memory) and about the machine."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

import httpx
import redis
from sqlalchemy.ext.asyncio import AsyncSession

from voice_service.kit.db import run_in_transaction
from voice_service.settings import Settings
from voice_service.tenancy import service as tenancy
from voice_service.tenancy.keys import SecretHasher, load_pepper

T = TypeVar("T")

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
# `serve`'s uvicorn settings; loop and HTTP implementation stay "auto" there too.
UVICORN = [PYTHON, "-m", "uvicorn", "--workers", "1", "--no-access-log", "--log-level", "info"]
START_TIMEOUT_S = 180.0  # model loading on a busy 2-core machine can take a while


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    root: str  # http://127.0.0.1:PORT
    logs: list[IO[bytes]]

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        for log in self.logs:
            log.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def service_env(data_dir: Path, source: Path | None = None) -> dict[str, str]:
    """A fresh embedded install: SQLite in `data_dir`, in-memory rate limits, own pepper;
    the package from `source` (another revision's `src`) instead of the installed one."""
    env = {**os.environ, "VOICE_SERVICE_DATA_DIR": str(data_dir)}
    if source is not None:
        env["PYTHONPATH"] = str(source)
    env["VOICE_SERVICE_DATABASE_URL"] = f"sqlite+aiosqlite:///{data_dir / 'voice-service.db'}"
    env.pop("VOICE_SERVICE_REDIS_URL", None)
    env.pop("VOICE_SERVICE_KEY_PEPPER", None)
    return env


def start_service(
    data_dir: Path,
    workers: int = 1,
    redis_url: str | None = None,
    source: Path | None = None,
    wyoming: str | None = None,
    settings: dict[str, str] | None = None,
) -> tuple[Server, dict[str, str]]:
    """`python -m voice_service serve --workers N --json`, with rate limits in Redis if
    `redis_url` is given (see `service_env` for `source`), the `wyoming` listeners and
    other `settings` (environment variables); returns the server and its first-start
    JSON."""
    port = free_port()
    out_path, err_path = data_dir / "serve.out", data_dir / "serve.err"
    out, err = out_path.open("wb"), err_path.open("wb")
    env = service_env(data_dir, source)
    if redis_url:
        env["VOICE_SERVICE_REDIS_URL"] = redis_url
    if wyoming:
        env["VOICE_SERVICE_WYOMING"] = wyoming
    env |= settings or {}
    command = [PYTHON, "-m", "voice_service", "serve", "--port", str(port), "--json"]
    process = subprocess.Popen(
        [*command, "--workers", str(workers)],
        env=env,
        cwd=data_dir,  # away from any .env in the caller's directory
        stdout=out,
        stderr=err,
    )
    server = Server(process, f"http://127.0.0.1:{port}", [out, err])
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        first = _first_json(out_path, process, deadline)
        _wait_ready(server, deadline, err_path)
    except BaseException:
        server.stop()
        raise
    return server, first


def start_peer(
    name: str,
    command: list[str],
    url: str,
    work: Path,
    ready: Callable[[], object],
    env: dict[str, str] | None = None,
) -> Server:
    """A peer server the bench compares with, `command` serving at `url` (its log in
    `work/NAME.log`), once `ready()` returns: it raises OSError until the peer listens (these
    servers load their model first)."""
    log = (work / f"{name}.log").open("wb")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    server = Server(process, url, [log])
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with {process.returncode}")
            try:
                ready()
                return server
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    except BaseException:
        server.stop()
        raise


def start_bare(body_file: Path, log_dir: Path) -> Server:
    """The bare Starlette app under uvicorn with `serve`'s settings: 1 worker, auto loop and
    HTTP implementation (uvloop, httptools), access log off, log level info."""
    port = free_port()
    env = {**os.environ, "BENCH_BARE_BODY": str(body_file), "PYTHONPATH": str(REPO)}
    err = (log_dir / "bare.err").open("wb")
    process = subprocess.Popen(
        [*UVICORN, "bench.bare_app:app", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=err,
    )
    server = Server(process, f"http://127.0.0.1:{port}", [err])
    try:
        _wait_ready(server, time.monotonic() + 60, log_dir / "bare.err")
    except BaseException:
        server.stop()
        raise
    return server


def _first_json(path: Path, process: subprocess.Popen[bytes], deadline: float) -> dict[str, str]:
    while time.monotonic() < deadline and process.poll() is None:
        try:
            parsed: dict[str, str] = json.loads(path.read_text())
            return parsed
        except json.JSONDecodeError:
            time.sleep(0.2)
    raise RuntimeError(f"serve printed no JSON (exit {process.poll()})")


def answers_ready(root: str) -> bool:
    """Whether the node at `root` answers /readyz with a 200 now."""
    try:
        return httpx.get(f"{root}/readyz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def _wait_ready(server: Server, deadline: float, err_path: Path) -> None:
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited: {err_path.read_text()[-2000:]}")
        if answers_ready(server.root):
            return
        time.sleep(0.05)
    raise RuntimeError("the server never became ready")


@dataclass(frozen=True, slots=True)
class Install:
    org_id: str
    key_id: str
    secret: str


def prepared_install(data_dir: Path, rate_limit: int) -> Install:
    """The embedded database `serve` would make in `data_dir`, made first, with an
    organization and a key: a Wyoming listener is bound to a key when the node starts."""
    env = service_env(data_dir)
    settings = Settings(
        data_dir=data_dir,
        database_url=env["VOICE_SERVICE_DATABASE_URL"],
        key_pepper=None,  # as `service_env` leaves it: the data dir's own pepper
    )

    async def make(session: AsyncSession) -> Install:
        org = await tenancy.create_org(session, "bench", None, None)
        hasher = SecretHasher(load_pepper(settings))
        created = await tenancy.create_key(session, hasher, org.id, "bench", rate_limit)
        return Install(org.id, created.key.id, created.secret)

    return asyncio.run(run_in_transaction(settings, make))


def create_key(data_dir: Path, org_id: str, rate_limit: int, source: Path | None = None) -> str:
    """`python -m voice_service keys create ORG --rate-limit N --json`, as an operator would."""
    command = [PYTHON, "-m", "voice_service", "keys", "create", org_id, "--json"]
    created = subprocess.run(
        [*command, "--rate-limit", str(rate_limit)],
        env=service_env(data_dir, source),
        cwd=data_dir,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    secret: str = json.loads(created.stdout)["secret"]
    return secret


def cpu_seconds(pid: int) -> float:
    """utime + stime of every thread of `pid` and of its live descendants (the workers of
    `serve --workers N`) so far."""
    return sum(_own_cpu_seconds(p) for p in (pid, *_descendants(pid)))


def _own_cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:  # gone meanwhile
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _descendants(pid: int) -> list[int]:
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            children += [int(child) for child in task.read_text().split()]
    return [grandchild for child in children for grandchild in (child, *_descendants(child))]


def redis_answers(url: str) -> bool:
    """Whether a Redis server answers at `url` (the figure with workers needs one)."""
    try:
        with redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2) as client:
            return bool(client.ping())
    except redis.RedisError:
        return False


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of `pid`, in KiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return {
        name: int(match.group(1))
        for name in ("VmRSS", "VmHWM")
        if (match := re.search(rf"^{name}:\s+(\d+) kB", status, re.MULTILINE))
    }


def reset_peak_rss(pid: int) -> bool:
    """Make VmHWM start again from the current RSS (Linux >= 4.0); False if refused."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def cpu_parallelism(loops: int) -> float:
    """How many cores two CPU-bound processes really get right now (2.0 on an idle 2-core
    machine): the shared machine's neighbours decide what the concurrency figure can reach."""
    spin = ["-c", f"for _ in range({loops}): pass"]

    def timed(count: int) -> float:
        started = time.perf_counter()
        processes = [subprocess.Popen([PYTHON, *spin]) for _ in range(count)]
        for process in processes:
            process.wait(timeout=120)
        return time.perf_counter() - started

    return 2 * timed(1) / timed(2)


def machine() -> dict[str, Any]:
    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.MULTILINE)
    meminfo = Path("/proc/meminfo").read_text()
    total = re.search(r"^MemTotal:\s+(\d+) kB", meminfo, re.MULTILINE)
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_model": model.group(1).strip() if model else "unknown",
        "memory_gib": round(int(total.group(1)) / 1024**2, 1) if total else None,
        "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3],
        "python": sys.version.split()[0],
    }


def peak_rss_growth(pid: int, action: Callable[[], T]) -> tuple[float, T, dict[str, Any]]:
    """The process's peak RSS growth in KiB while `action` runs, with what it returned."""
    baseline = memory_kib(pid)["VmRSS"]
    peak_reset = reset_peak_rss(pid)
    sampled = [baseline]
    stop = threading.Event()

    def sample() -> None:  # in case the kernel refused the peak reset
        while not stop.is_set():
            sampled.append(memory_kib(pid)["VmRSS"])
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result = action()
    finally:
        stop.set()
        sampler.join()
    peak = max(max(sampled), memory_kib(pid)["VmHWM"] if peak_reset else 0)
    details = {"baseline_kib": baseline, "peak_kib": peak, "vmhwm_reset": peak_reset,
               "samples": len(sampled)}  # fmt: skip
    return peak - baseline, result, details
