"""Figure 15: what the request ledger, scopes, caps and idempotency cost `GET /voices`.

The revision before them (`BEFORE`) is checked out beside this one (`git worktree`) and
served from its own source with the same interpreter and packages, on its own fresh data
dir; the two servers take the same GET load in alternated rounds, so machine noise hits
both alike. Left out, with a note, where the checkout has no git history.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

from bench.procs import REPO

# The last revision before the ledger (issue 25): 3e6d989.
BEFORE = "3e6d98985078ef0585c4416f437d4b5aed38d343"


@contextlib.contextmanager
def revision_source(work: Path, revision: str = BEFORE) -> Iterator[Path | None]:
    """The `src` directory of `revision` checked out under `work`; None without git."""
    checkout = work / f"revision-{revision[:7]}"
    try:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(checkout), revision],
            check=True,
            capture_output=True,
            timeout=120,
        )
    except (OSError, subprocess.CalledProcessError):
        yield None
        return
    try:
        yield checkout / "src"
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(checkout)],
            check=False,
            capture_output=True,
            timeout=120,
        )
