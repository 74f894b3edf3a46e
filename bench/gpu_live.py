"""Figure 16 on a GPU (issue 39): live transcription with the packaged Whisper base on a
GPU, the final text's target 600 ms after the end of speech. Two ways to put it there:

- `--whisper provider`: a light node (no local engines) whose providers file routes
  transcription to faster-whisper-server running Whisper on the GPU;
- `--whisper node`: the node's own Whisper on the GPU (`VOICE_SERVICE_WHISPER_DEVICE`).

Run where a GPU is (it is not part of `python -m bench`, whose machine has none):

    python -m bench.gpu_live --model DIR [--whisper provider] [--device cuda] [--out FILE]

`--model` is the joined CTranslate2 Whisper base (`voice_service.engines.whisper.
prepare_base_model` writes it); the real recordings are `bench.realtime`'s. The same
sessions as figure 16's (bench/realtime.py), timed the same way; `--device cpu` runs it here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench import provider_overhead, realtime
from bench.procs import Server, start_service

FINAL_TARGET_MS = 600.0
# One upstream process per session of the four at once: faster-whisper-server decodes
# inside its event loop, one request at a time a process.
WORKERS = 4
MODEL_OPTIONS = {
    "cuda": "{device: cuda, compute_type: float16}",
    "cpu": provider_overhead.CPU_MODEL_OPTIONS,
}


def measure(model: Path, whisper: str, device: str, repeats: int, work: Path) -> dict[str, Any]:
    """The live figures, and what was measured to get them."""
    if whisper == "provider":
        fws_options = MODEL_OPTIONS[device]
        with provider_overhead.servers(model, work, None, fws_options, WORKERS) as servers:
            _fws, node, headers = servers
            key = headers["Authorization"].removeprefix("Bearer ")
            results = asyncio.run(realtime.live_turns(node.root, key, False, repeats))
        where = f"faster-whisper-server, {WORKERS} workers, {fws_options}"
    else:
        node, first = _own_whisper_node(model, device, work)
        try:
            results = asyncio.run(realtime.live_turns(node.root, first["api_key"], False, repeats))
        finally:
            node.stop()
        where = f"the node's own Whisper, VOICE_SERVICE_WHISPER_DEVICE={device}"
    figures = realtime.live_summary(results["alone"], results["four"], results["batch_decode_s"])
    return {
        "figures": figures,
        "final_target_ms": FINAL_TARGET_MS,
        "final_target_met": figures["final_p50_ms"] <= FINAL_TARGET_MS,
        "whisper": where,
        "gpu": _gpu_name() if device == "cuda" else None,
        "cpu": platform.processor() or platform.machine(),
        "repeats": repeats,
        "results": results,
    }


def _own_whisper_node(model: Path, device: str, work: Path) -> tuple[Server, dict[str, str]]:
    """`voice-service serve` with Whisper (`model`, linked where the node joins it) on
    `device` and no speech engines; the node and its first-start JSON."""
    data_dir = work / "node"
    (data_dir / "models").mkdir(parents=True)
    (data_dir / "models" / "whisper-base").symlink_to(model.resolve(), target_is_directory=True)
    settings = {
        "VOICE_SERVICE_STT_ENGINES": "whisper",
        "VOICE_SERVICE_TTS_ENGINES": "",
        "VOICE_SERVICE_WHISPER_DEVICE": device,
        "VOICE_SERVICE_DEFAULT_RATE_LIMIT": "10000000",  # checked, never reached
    }
    return start_service(data_dir, settings=settings)


def _gpu_name() -> str:
    query = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
    return subprocess.run(query, capture_output=True, text=True, check=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_live", description=__doc__)
    parser.add_argument("--model", type=Path, required=True, help="the joined Whisper base")
    parser.add_argument("--whisper", choices=("provider", "node"), default="provider")
    parser.add_argument("--device", choices=sorted(MODEL_OPTIONS), default="cuda")
    parser.add_argument("--repeats", type=int, default=7, help="sessions alone, and rounds of 4")
    parser.add_argument("--out", type=Path, help="write the result here as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-gpu-live-") as work:
        result = measure(args.model, args.whisper, args.device, args.repeats, Path(work))
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(json.dumps(result["figures"], indent=2))


if __name__ == "__main__":
    main()
