"""A loopback server speaking the Hugging Face Hub's file routes, as huggingface_hub's
`hf_hub_download` uses them (HEAD, then GET, on /OWNER/NAME/resolve/REVISION/PATH, with
X-Repo-Commit and the file's SHA-256 as its ETag, ranges honoured), serving files that are
already on this machine. It keeps what it was asked, and can cut a download short. Tests
and `bench.models` pull from it with `voice-service models` (`models`), as an operator does."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from voice_service.models.catalogue import catalogue

# The catalogue's entry whose files ship in this project's packages (the Whisper base).
BASE = catalogue()["base"]
CLI = [sys.executable, "-m", "voice_service"]

_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<revision>[^/]+)/(?P<path>.+)$")
_RANGE = re.compile(r"^bytes=(\d+)-$")


@dataclass
class Hub:
    """Files by (repo, commit, path); the requests seen, as (method, path, Range)."""

    files: dict[tuple[str, str, str], Path]
    seen: list[tuple[str, str, str | None]] = field(default_factory=list)
    # A file whose next GET stops after this many bytes (the connection dropped).
    cut_after: dict[str, int] = field(default_factory=dict)
    root: str = ""

    def gets(self, name: str) -> list[str | None]:
        """The Range of each GET of a file named `name` (None: from the start)."""
        return [
            range_
            for method, path, range_ in self.seen
            if method == "GET" and path.endswith(f"/{name}")
        ]


def models(
    data_dir: Path,
    hub: Hub | None,
    *args: str,
    offline: bool = False,
    settings: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`voice-service models ARGS` on `data_dir`, with `hub` as the Hub; `offline`: as on a
    machine without one (HF_HUB_OFFLINE); `settings`: more environment variables."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(data_dir),
        "VOICE_SERVICE_DATA_DIR": str(data_dir),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "NO_PROXY": "127.0.0.1",
    }
    if hub is not None:
        env["HF_ENDPOINT"] = hub.root
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    env |= settings or {}
    return subprocess.run(
        [*CLI, "models", *args], env=env, capture_output=True, text=True, timeout=300
    )


def answer(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@contextmanager
def running_hub(files: dict[tuple[str, str, str], Path]) -> Iterator[Hub]:
    hub = Hub(files)
    digests = {key: _sha256(path) for key, path in files.items()}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def do_GET(self) -> None:
            self._answer(body=True)

        def _answer(self, *, body: bool) -> None:
            range_header = self.headers.get("Range")
            hub.seen.append((self.command, self.path, range_header))
            match = _RESOLVE.match(self.path.split("?")[0])
            key = (match["repo"], match["revision"], match["path"]) if match else None
            if key is None or key not in hub.files:
                self.send_response(404)
                self.send_header("X-Error-Code", "EntryNotFound" if match else "RepoNotFound")
                if match:
                    self.send_header("X-Repo-Commit", match["revision"])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            data = hub.files[key].read_bytes()
            start = 0
            if range_header and (wanted := _RANGE.match(range_header)):
                start = int(wanted[1])
            self.send_response(206 if start else 200)
            self.send_header("X-Repo-Commit", key[1])
            self.send_header("ETag", f'"{digests[key]}"')
            self.send_header("Content-Length", str(len(data) - start))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            self.end_headers()
            if not body:
                return
            cut = hub.cut_after.pop(key[2], None)
            if cut is not None:
                self.wfile.write(data[start : start + cut])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(data[start:])

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hub.root = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
