"""The README's commands and the examples of the guides it points to (docs/), run as a new
user pastes them against `voice-service serve`, their output checked: "Calling it" top to
bottom (every one answers 2xx and leaves the files the later ones, and the API guide's
OpenAI SDK example, use), the billing controls, the WebSocket clients, known speakers named
with curl, and the webhook receivers. Every example finds the service where
`VOICE_API_URL` says, as the README tells a user to set it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import av
import httpx
from bench.wer import word_errors

from tests.helpers.ports import free_port
from tests.helpers.servers import Server, running_server
from tests.helpers.speakers import CALLER, READER, conversation, reference, who_said
from tests.helpers.voices import JOE
from voice_service.audio.encode import wav_of
from voice_service.engines.speaker_embedding import SAMPLE_RATE
from voice_service.settings import Settings

README = Path(__file__).parents[1] / "README.md"
API_GUIDE = README.parent / "docs" / "api.md"
BILLING = README.parent / "docs" / "billing.md"
# Where the README's user's serve listens; the examples' default.
README_ROOT = "http://127.0.0.1:8000"


def calling_it_commands() -> str:
    section = README.read_text().split("\n## Calling it\n", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the README's Calling it section has no sh block"
    return block[1]


def as_run_here(script: str, root: str) -> str:
    """The README's commands against this server: the key from the environment, curl made to
    fail on an HTTP error status, and the streamed speech saved instead of played."""
    assert "export VOICE_API_KEY=vs_..." in script and "| ffplay" in script
    assert f"export VOICE_API_URL={README_ROOT}" in script
    script = script.replace("export VOICE_API_KEY=vs_...", ": key from the environment")
    script = script.replace(f"export VOICE_API_URL={README_ROOT}", f"export VOICE_API_URL={root}")
    script = re.sub(r"\| ffplay .*", "> streamed.mp3", script)
    return failing_on_errors(script)


def failing_on_errors(script: str) -> str:
    """`script` with curl made to fail on an HTTP error status."""
    return re.sub(r"\bcurl -s", "curl -fs", script)


def run_shell(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`script` run by bash, stopping at the first command that fails; it must succeed."""
    done = subprocess.run(  # noqa: S603
        ["/bin/bash", "-e", "-o", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return done


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
        # The API guide's OpenAI SDK example, beside the files made above (hola.mp3).
        (work / "speech_and_text.py").write_text(python_example("# speech_and_text.py:"))
        sdk = subprocess.run(
            [sys.executable, "speech_and_text.py"],
            cwd=work,
            env=examples_env(server),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert sdk.returncode == 0, sdk.stderr + sdk.stdout
        assert audio_seconds(work / "hi.mp3") > 0.5
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
    """The API guide's Python block that starts with `first_line` (its file name)."""
    blocks = re.findall(r"```python\n(.*?)```", API_GUIDE.read_text(), re.DOTALL)
    (block,) = [b for b in blocks if b.startswith(first_line)]
    return block


def examples_env(server: Server) -> dict[str, str]:
    """The environment the README has a user make: the key, and the service's address."""
    return {**server.env, "VOICE_API_KEY": server.api_key, "VOICE_API_URL": server.root}


def test_the_websocket_examples_run_as_written(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        env = examples_env(server)
        for name in ("reply.py", "live.py"):
            (tmp_path / name).write_text(python_example(f"# {name}:"))
        turn_section = API_GUIDE.read_text().split("client/bin/python live.py turn.pcm", 1)[0]
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


def api_guide_block(language: str, containing: str) -> str:
    """The API guide's one `language` block that contains `containing`, out of the indent
    of a list item it may be in."""
    blocks = re.findall(rf"```{language}\n(.*?)```", API_GUIDE.read_text(), re.DOTALL)
    (block,) = [b for b in blocks if containing in b]
    return textwrap.dedent(block)


def test_the_known_speakers_example_names_both_people(tmp_path: Path) -> None:
    # A call between an agent (the librivox reader), known by the organization's clone of
    # their voice, and a customer (the card caller), known by a clip: 3.6 s, too long for
    # one argument of a command line once in base64.
    agent, customer = READER, CALLER
    call, truth = conversation([(agent, 0), (customer, 4), (agent, 2), (customer, 1)])
    work = tmp_path / "user"
    work.mkdir()
    # WAVs under the example's names: the service reads a file's content, not its name.
    (work / "call.mp3").write_bytes(call)
    (work / "customer.wav").write_bytes(wav_of(reference(customer, 0, 2, 3), SAMPLE_RATE))
    with running_server(tmp_path) as server:
        cloned = httpx.post(
            f"{server.base_url}/voices/clone",
            headers={"Authorization": f"Bearer {server.api_key}"},
            data={"name": "Agent", "consent": "true"},
            files={"file": ("agent.wav", wav_of(reference(agent, 3, 4), SAMPLE_RATE))},
            timeout=120,
        )
        assert cloned.status_code == 201, cloned.text
        example = api_guide_block("bash", "known_speaker_references=")
        script = failing_on_errors(example.replace("voice_...", cloned.json()["voice"]["id"]))
        done = run_shell(f"BASE={server.base_url}\n{script}", work, examples_env(server))
    segments = json.loads(done.stdout)["segments"]
    assert who_said(segments, truth) == {"agent": agent, "customer": customer}


RECEIVERS = ("receiver", "receiver_openai")  # the API guide's, by their file names


def test_the_webhook_receivers_verify_and_read_a_jobs_event(tmp_path: Path) -> None:
    ports = {module: free_port() for module in RECEIVERS}
    # As the guide tells the operator: the receivers' hosts and ports allowed.
    allowed = ",".join(f"127.0.0.1:{port}" for port in ports.values())
    work = tmp_path / "user"
    work.mkdir()
    with running_server(tmp_path, outbound_allowed_hosts=allowed) as server:
        spoken = httpx.post(
            f"{server.base_url}/text-to-speech",
            headers={"Authorization": f"Bearer {server.api_key}"},
            json={"text": "Welcome to Voice Service.", "voice_id": JOE},
            timeout=120,
        )
        assert spoken.status_code == 200, spoken.text
        (work / "hello.mp3").write_bytes(spoken.content)
        try:
            for module, port in ports.items():
                (work / f"{module}.py").write_text(python_example(f"# {module}.py:"))
                script = as_tried_here(api_guide_block("sh", "uvicorn receiver:app"), module, port)
                done = run_shell(f"BASE={server.base_url}\n{script}", work, examples_env(server))
                job = json.loads(done.stdout)["id"]
                told = wait_for(work / f"{module}.log", f"transcription.completed {job}")
                assert told, (work / f"{module}.log").read_text()
        finally:
            for started in work.glob("*.pid"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(started.read_text()), signal.SIGTERM)


def as_tried_here(script: str, module: str, port: int) -> str:
    """The guide's try-out with `module` as the receiver on `port`, its output in a log and
    its process id in a file (the guide leaves it running in the user's shell)."""
    start = "uvicorn receiver:app --port 9000 &"
    assert start in script and "127.0.0.1:9000" in script
    script = script.replace(
        start,
        f"PYTHONUNBUFFERED=1 {sys.executable} -m uvicorn {module}:app --port {port} "
        f"> {module}.log 2>&1 & echo $! > {module}.pid",
    )
    return failing_on_errors(script.replace("127.0.0.1:9000", f"127.0.0.1:{port}"))


def wait_for(log: Path, line: str, seconds: float = 120) -> bool:
    """Whether `line` appears in `log` within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if line in log.read_text():
            return True
        time.sleep(0.3)
    return False


def test_every_setting_is_in_the_readme_table() -> None:
    table = README.read_text().split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    rows = set(re.findall(r"^\| `(VOICE_SERVICE_[A-Z0-9_]+)` \|", table, re.MULTILINE))
    assert rows == {f"VOICE_SERVICE_{name.upper()}" for name in Settings.model_fields}
