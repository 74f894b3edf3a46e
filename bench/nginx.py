"""Debian's nginx in front of a node, with the configuration the operations guide ships
(deploy/nginx/voice-service.conf): its ports made the test's, nothing else changed."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from bench.procs import free_port

SHIPPED = Path(__file__).resolve().parents[1] / "deploy" / "nginx" / "voice-service.conf"
LISTEN, NODE = "listen 80;", "server 127.0.0.1:8000;"


@contextmanager
def nginx_in_front(directory: Path, node_port: int) -> Iterator[str]:
    """nginx proxying to the node on `node_port`: the root URL it listens on."""
    binary = shutil.which("nginx") or "/usr/sbin/nginx"  # not on a user's PATH on Debian
    assert Path(binary).is_file(), "nginx is not installed (.ci/run installs it)"
    port = free_port()
    shipped = SHIPPED.read_text()
    assert LISTEN in shipped and NODE in shipped
    site = shipped.replace(LISTEN, f"listen 127.0.0.1:{port};")
    site = site.replace(NODE, f"server 127.0.0.1:{node_port};")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "voice-service.conf").write_text(site)
    temp = {name: directory / name for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
    (directory / "nginx.conf").write_text(
        f"""
daemon off;
worker_processes 1;
pid {directory / "nginx.pid"};
error_log {directory / "error.log"} info;
events {{ worker_connections 256; }}
http {{
    access_log {directory / "access.log"};
    client_body_temp_path {temp["body"]};
    proxy_temp_path {temp["proxy"]};
    fastcgi_temp_path {temp["fastcgi"]};
    uwsgi_temp_path {temp["uwsgi"]};
    scgi_temp_path {temp["scgi"]};
    include {directory / "voice-service.conf"};
}}
"""
    )
    process = subprocess.Popen(
        [binary, "-p", str(directory), "-c", str(directory / "nginx.conf"), "-e", "stderr"],
        stdout=subprocess.DEVNULL,
        stderr=(directory / "stderr.log").open("w"),
    )
    root = f"http://127.0.0.1:{port}"
    try:
        _wait_listening(root, process, directory)
        yield root
    finally:
        process.terminate()
        process.wait(timeout=30)


def _wait_listening(root: str, process: subprocess.Popen[bytes], directory: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert process.poll() is None, (directory / "stderr.log").read_text()
        try:
            httpx.get(root + "/healthz", timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError(f"nginx did not listen: {(directory / 'stderr.log').read_text()}")
