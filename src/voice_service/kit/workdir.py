"""Each process's own scratch directory, DATA_DIR/run/<id>: its temporary uploads and its
request-log spool.

A process holds an exclusive lock on its directory's lock file for as long as it lives, and
the kernel drops the lock when it dies, however it dies. A directory whose lock can be
taken therefore belongs to a dead process (SIGKILL, power cut): the next process starting
on this data dir takes it over, replays its spool and deletes the rest. No process ever
touches a live sibling's files.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
from pathlib import Path

LOCK_FILE = "lock"
SPOOL_FILE = "request-log.spool"
UPLOADS_DIR = "uploads"


class ProcessDir:
    def __init__(self, path: Path, lock_fd: int) -> None:
        self.path = path
        self._lock_fd = lock_fd

    @classmethod
    def claim(cls, data_dir: Path) -> ProcessDir:
        """A new directory for this process, locked."""
        root = data_dir / "run"
        while True:
            path = root / f"{os.getpid()}-{secrets.token_hex(4)}"
            path.mkdir(parents=True)
            claimed = _lock(path)
            if claimed is not None:
                (path / UPLOADS_DIR).mkdir()
                return cls(path, claimed)

    @property
    def spool(self) -> Path:
        return self.path / SPOOL_FILE

    @property
    def uploads(self) -> Path:
        return self.path / UPLOADS_DIR

    def remove(self) -> None:
        """Delete the directory, then let go of it."""
        shutil.rmtree(self.path, ignore_errors=True)
        os.close(self._lock_fd)

    def release(self) -> None:
        """Let go of the directory but keep what is in it (a spool the database has not
        taken yet): the next process to start takes it over."""
        shutil.rmtree(self.uploads, ignore_errors=True)
        os.close(self._lock_fd)


def claim_orphans(data_dir: Path) -> list[ProcessDir]:
    """The directories of dead processes, each now locked by this one."""
    # Uploads of versions before process directories; nothing writes there any more.
    shutil.rmtree(data_dir / "tmp", ignore_errors=True)
    root = data_dir / "run"
    orphans = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        claimed = _lock(path, create=False)
        if claimed is not None:
            orphans.append(ProcessDir(path, claimed))
    return orphans


def _lock(path: Path, *, create: bool = True) -> int | None:
    """The lock on `path`'s lock file, or None if a live process holds it (or it is
    gone: deleted by a process that took it over between our listing and our lock)."""
    lock_path = path / LOCK_FILE
    flags = os.O_RDWR | (os.O_CREAT if create else 0)
    try:
        fd = os.open(lock_path, flags, 0o600)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # The file may have been deleted by its previous taker after we opened it; only a
        # lock on the file still at that path counts.
        if os.fstat(fd).st_ino == os.stat(lock_path).st_ino:
            return fd
    except (BlockingIOError, FileNotFoundError):
        pass
    os.close(fd)
    return None
