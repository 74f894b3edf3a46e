"""The README's commands and the examples of the guides it points to (docs/), run as a new
user pastes them against `voice-service serve`, their output checked: "Calling it" top to
bottom (every one answers 2xx and leaves the files the later ones, and the API guide's
translation, use), the billing controls, the WebSocket clients."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import av
import httpx
from bench.wer import word_errors

from tests.helpers.servers import running_server
from voice_service.settings import Settings

README = Path(__file__).parents[1] / "README.md"
API_GUIDE = README.parent / "docs" / "api.md"
BILLING = README.parent / "docs" / "billing.md"


def calling_it_commands() -> str:
    section = README.read_text().split("\n## Calling it\n", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the README's Calling it section has no sh block"
    return block[1]


def as_run_here(script: str, root: str) -> str:
    """The README's commands against this server: the key from the environment, curl made to
    fail on an HTTP error status, and the streamed speech saved instead of played."""
    assert "export VOICE_API_KEY=vs_..." in script and "| ffplay" in script
    script = script.replace("export VOICE_API_KEY=vs_...", ": key from the environment")
    script = script.replace("ROOT=http://127.0.0.1:8000", f"ROOT={root}")
    script = re.sub(r"\| ffplay .*", "> streamed.mp3", script)
    return re.sub(r"\bcurl -s", "curl -fs", script)


def audio_seconds(path: Path) -> float:
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(stream))
        return samples / stream.codec_context.sample_rate


def test_the_readme_runs_top_to_bottom(tmp_path: Path) -> None:
    work = tmp_path / "user"
    work.mkdir()
    with running_server(tmp_path) as server:
        done = subprocess.run(  # noqa: S603
            [
                "/bin/bash",
                "-e",
                "-o",
                "pipefail",
                "-c",
                as_run_here(calling_it_commands(), server.root),
            ],
            cwd=work,
            env={**server.env, "VOICE_API_KEY": server.api_key},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr + done.stdout
        for name in ("hello.mp3", "hola.mp3", "streamed.mp3", "sample.wav", "narrator.mp3"):
            assert audio_seconds(work / name) > 0.5, name
        assert (work / "hold.ulaw").stat().st_size > 8_000  # a byte a sample at 8 kHz
        captions = json.loads((work / "captions.json").read_text())
        assert "".join(captions["alignment"]["characters"]) == "Captions follow the voice."
        # hola.mp3 is Spanish, as the OpenAI section's translation example needs.
        heard = httpx.post(
            f"{server.base_url}/speech-to-text",
            headers={"Authorization": f"Bearer {server.api_key}"},
            files={"file": ("hola.mp3", (work / "hola.mp3").read_bytes())},
            timeout=120,
        )
        assert heard.status_code == 200, heard.text
        assert heard.json()["language"] == "es", heard.text
        # The clone was made, then deleted (the server's own log of what it answered).
        rows = server.query("SELECT method, path, status FROM request_log")
        answered = {(row["method"], row["path"], row["status"]) for row in rows}
        assert ("POST", "/api/v1/voices/clone", 201) in answered
        assert any(m == "DELETE" and s == 200 for m, _, s in answered)


def billing_controls_commands() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", BILLING.read_text(), re.DOTALL)


def test_the_billing_controls_examples_print_what_they_say(tmp_path: Path) -> None:
    idempotency, caps, *_ = billing_controls_commands()
    with running_server(tmp_path) as server:
        script = "\n".join(
            [f"BASE={server.base_url}", idempotency, caps.replace("ORG_ID", server.org_id)]
        )
        path = f"{Path(sys.executable).parent}:{server.env['PATH']}"  # `voice-service`
        done = subprocess.run(  # noqa: S603
            ["/bin/bash", "-e", "-o", "pipefail", "-c", script],
            cwd=tmp_path,
            env={**server.env, "PATH": path, "VOICE_API_KEY": server.api_key},
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert done.returncode == 0, done.stderr + done.stdout
    # What the README's comments say each command prints.
    lines = [line.strip() for line in done.stdout.splitlines()]
    assert lines == [
        "idempotent-replayed: true",
        "the same bytes",
        f"x-units-remaining: {100_000 - len('Hello.')}",
    ]


def python_example(first_line: str) -> str:
    """The README's Python block that starts with `first_line` (its file name)."""
    blocks = re.findall(r"```python\n(.*?)```", API_GUIDE.read_text(), re.DOTALL)
    (block,) = [b for b in blocks if b.startswith(first_line)]
    return block


def test_the_websocket_examples_run_as_written(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        address = server.root.removeprefix("http://")
        env = {**server.env, "VOICE_API_KEY": server.api_key}
        for name in ("reply.py", "live.py"):
            script = python_example(f"# {name}:").replace("127.0.0.1:8000", address)
            (tmp_path / name).write_text(script)
        turn_section = API_GUIDE.read_text().split("python3 live.py turn.pcm", 1)[0]
        make_turn = turn_section.rsplit("```sh\n", 1)[1]  # its block, up to running live.py
        steps = [
            [sys.executable, "reply.py"],
            [
                "/bin/bash",
                "-e",
                "-o",
                "pipefail",
                "-c",
                f"BASE={server.base_url}\n{make_turn}",
            ],
            [sys.executable, "live.py", "turn.pcm"],
        ]
        outputs = []
        for step in steps:
            done = subprocess.run(  # noqa: S603
                step, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
            )
            assert done.returncode == 0, done.stderr + done.stdout
            outputs.append(done.stdout)
    # reply.py: the whole reply spoken, as 16 kHz 16-bit PCM.
    assert (tmp_path / "reply.pcm").stat().st_size / 32_000 > 1.5
    # live.py: it ends by itself, its last line the turn as heard.
    last = outputs[-1].strip().splitlines()[-1]
    assert last.startswith("turn: ")
    said = "Please read me my last order."
    assert word_errors(said, last.removeprefix("turn: "))[0] <= 1, last


def test_every_setting_is_in_the_readme_table() -> None:
    table = README.read_text().split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    rows = set(re.findall(r"^\| `(VOICE_SERVICE_[A-Z0-9_]+)` \|", table, re.MULTILINE))
    assert rows == {f"VOICE_SERVICE_{name.upper()}" for name in Settings.model_fields}
