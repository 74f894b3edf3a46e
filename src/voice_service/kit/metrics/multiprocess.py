"""Metrics shared by the worker processes of `serve --workers N`.

prometheus-client keeps each process's values in files of one directory, named by the
PROMETHEUS_MULTIPROC_DIR variable, which it reads when first imported: `serve` sets it
before uvicorn spawns its workers, and every worker's /metrics sums them all.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from prometheus_client.multiprocess import mark_process_dead

VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


def share_between_workers(data_dir: Path, workers: int) -> None:
    """Before the workers start: a fresh directory for this node's processes. A single
    process keeps its metrics in memory (unless the operator set the variable)."""
    if workers == 1:
        return
    # Per `serve` process, so that two nodes sharing a data dir keep their own counts.
    parent = data_dir / "metrics"
    for stale in parent.glob("*"):
        if stale.name.isdigit() and not _alive(int(stale.name)):
            shutil.rmtree(stale, ignore_errors=True)
    directory = (parent / str(os.getpid())).resolve()
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    os.environ[VARIABLE] = str(directory)


def shared_directory() -> Path | None:
    """The directory worker processes share, when this process is one of them."""
    value = os.environ.get(VARIABLE)
    return Path(value) if value else None


def worker_exited(directory: Path, pid: int) -> None:
    """Drop a gone worker's gauges (its requests no longer wait or run); its counters stay,
    as what it served was served."""
    mark_process_dead(pid, str(directory))  # type: ignore[no-untyped-call]


def forget_dead_workers(directory: Path) -> None:
    """Gauges of workers that died without shutting down (SIGKILL, out of memory): uvicorn
    starts a replacement, and the dead one's queue must not count forever."""
    for file in directory.glob("gauge_live*_*.db"):
        pid = file.stem.rsplit("_", 1)[-1]
        if pid.isdigit() and not _alive(int(pid)):
            worker_exited(directory, int(pid))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True
