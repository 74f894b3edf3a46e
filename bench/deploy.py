"""Issue 55's figures for deployment: the image's size and its layers, a container's time
from `podman run` to ready beside `serve` on the host, and text to speech through nginx with
the shipped configuration beside straight to the node. Each pair is taken in turn, in one
run. Needs what .ci/run installs for tests/deploy (podman, runc, debootstrap, nginx), as
root, and is not part of `python -m bench`:

    python -m bench.deploy [--repeats N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.nginx import nginx_in_front
from bench.podman import IMAGE, Podman, running_container
from bench.procs import machine, start_service
from voice_service.core.ids import catalogue_voice_id

TEXT = "Please send the quarterly report to the finance team before Friday afternoon."
VOICE = catalogue_voice_id("piper:en_US-joe-medium")
SIZE_TARGET_GB = 1.6
READY_RATIO_TARGET = 1.2
PROXY_RATIO_TARGET = 1.05


def image(podman: Podman, work: Path) -> dict[str, Any]:
    """The image built on a Debian base made here; its size, its base's and its layers."""
    base = podman.debian_base(work)
    podman.build(base, work / "build.log")
    history = json.loads(podman("history", "--format=json", IMAGE))
    layers = [
        {"bytes": layer["size"], "made_by": " ".join(layer["CreatedBy"].split())[:100]}
        for layer in history
        if layer["size"]
    ]
    return {"bytes": podman.size(IMAGE), "base_bytes": podman.size(base), "layers": layers}


def time_to_ready(podman: Podman, work: Path, repeats: int) -> dict[str, Any]:
    """Seconds from start to a 200 from /readyz on an empty data dir: a container (its own
    new volume) and `serve` on the host, in turn."""
    container, host = [], []
    for index in range(repeats):
        started = time.perf_counter()
        with running_container(podman, f"vs-bench-ready-{index}", {}):
            container.append(time.perf_counter() - started)
        data_dir = work / f"host-{index}"
        data_dir.mkdir()
        started = time.perf_counter()
        server, _ = start_service(data_dir)
        host.append(time.perf_counter() - started)
        server.stop()
    return {"container_s": container, "host_s": host}


def through_the_proxy(work: Path, repeats: int) -> dict[str, Any]:
    """Seconds of a whole text-to-speech answer, straight from a node and through nginx in
    front of it, in turn (each client keeps its connection)."""
    data_dir = work / "proxied"
    data_dir.mkdir()
    server, first = start_service(data_dir)
    headers = {"Authorization": f"Bearer {first['api_key']}"}
    straight_s, through_s = [], []
    try:
        with (
            nginx_in_front(work / "nginx", int(server.root.rsplit(":", 1)[1])) as proxy,
            httpx.Client(base_url=server.root, headers=headers, timeout=120) as straight,
            httpx.Client(base_url=proxy, headers=headers, timeout=120) as through,
        ):
            for _ in range(2):  # warm both paths and the voice
                _spoken(straight)
                _spoken(through)
            for _ in range(repeats):
                straight_s.append(_spoken(straight))
                through_s.append(_spoken(through))
    finally:
        server.stop()
    return {"straight_s": straight_s, "through_s": through_s}


def _spoken(client: httpx.Client) -> float:
    started = time.perf_counter()
    answer = client.post("/api/v1/text-to-speech", json={"text": TEXT, "voice_id": VOICE})
    answer.raise_for_status()
    return time.perf_counter() - started


def figures(result: dict[str, Any]) -> list[dict[str, Any]]:
    ready, proxy = result["time_to_ready"], result["proxy"]
    container_s = statistics.median(ready["container_s"])
    host_s = statistics.median(ready["host_s"])
    straight_s = statistics.median(proxy["straight_s"])
    through_s = statistics.median(proxy["through_s"])
    size_gb = result["image"]["bytes"] / 1e9
    return [
        _figure("image_gb", "image size (Debian base made here)", size_gb, "GB",
                "<=", SIZE_TARGET_GB),
        _figure("image_base_gb", "its base", result["image"]["base_bytes"] / 1e9, "GB"),
        _figure("ready_ratio", "run to ready: container / serve on the host",
                container_s / host_s, "x", "<=", READY_RATIO_TARGET),
        _figure("ready_container_s", "container to ready, median", container_s, "s"),
        _figure("ready_host_s", "serve to ready, median", host_s, "s"),
        _figure("proxy_ratio", "text to speech through nginx / straight, median",
                through_s / straight_s, "x", "<=", PROXY_RATIO_TARGET),
        _figure("proxy_through_s", "through nginx, median", through_s, "s"),
        _figure("proxy_straight_s", "straight to the node, median", straight_s, "s"),
    ]  # fmt: skip


def _figure(
    key: str, label: str, value: float, unit: str, op: str | None = None, target: float = 0.0
) -> dict[str, Any]:
    met = None if op is None else value <= target
    return {"key": key, "label": label, "value": value, "unit": unit, "target": target, "met": met}


def main() -> None:
    parser = argparse.ArgumentParser(description="Voice Service deployment figures (issue 55)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, help="where to write the result (JSON)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="voice-bench-deploy-") as directory:
        work = Path(directory)
        podman = Podman(work / "podman")
        result: dict[str, Any] = {"machine": machine(), "repeats": args.repeats}
        result["image"] = image(podman, work)
        result["time_to_ready"] = time_to_ready(podman, work, args.repeats)
        result["proxy"] = through_the_proxy(work, args.repeats * 4)
    result["figures"] = figures(result)
    for figure in result["figures"]:
        verdict = {True: "met", False: "NOT MET", None: ""}[figure["met"]]
        print(f"{figure['label']}: {figure['value']:.3g} {figure['unit']} {verdict}")
    for layer in result["image"]["layers"]:
        print(f"  layer {layer['bytes'] / 1e6:8.1f} MB  {layer['made_by']}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
