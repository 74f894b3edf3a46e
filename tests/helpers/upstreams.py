"""Upstreams a node sends inference to, as the providers file names them: a real
faster-whisper-server (PyPI) over the packaged Whisper base, and providers files."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.helpers.ports import free_port
from voice_service.engines.whisper import prepare_base_model


@dataclass(frozen=True)
class FasterWhisperServer:
    root: str  # http://127.0.0.1:PORT
    log: Path  # its uvicorn access log: the evidence of what it answered

    @property
    def v1(self) -> str:
        return f"{self.root}/v1"

    def transcriptions_answered(self) -> int:
        lines = self.log.read_text(errors="replace").splitlines()
        return sum('"POST /v1/audio/transcriptions HTTP/1.1" 200' in line for line in lines)


@contextmanager
def faster_whisper_server(data_dir: Path) -> Iterator[FasterWhisperServer]:
    """faster-whisper-server on Whisper base (joined from the packaged parts into
    `data_dir`), on a free port, until the block ends."""
    model = prepare_base_model(data_dir)
    port = free_port()
    log = data_dir / "faster-whisper-server.log"
    executable = shutil.which("faster-whisper-server", path=str(Path(sys.executable).parent))
    assert executable is not None, "faster-whisper-server is a dev dependency"
    with log.open("w") as out:
        process = subprocess.Popen(  # noqa: S603
            [executable, str(model), "--host", "127.0.0.1", "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
        )
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(f"{root}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "faster-whisper-server did not start"
            time.sleep(0.2)
        yield FasterWhisperServer(root, log)
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def providers_file(path: Path, toml: str) -> Path:
    path.write_text(toml, encoding="utf-8")
    return path
