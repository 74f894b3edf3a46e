"""One `serve` per database while rate limits are counted in memory.

Without Redis a serve counts each key's requests in its own memory, so two serves on one
database would each allow a key its whole limit. A serve therefore holds a lock file for as
long as it runs: exclusively without Redis, shared with it, so serves sharing a Redis run
side by side, and none runs beside one that counts in memory. The lock is flock's: the
kernel drops it when its process dies, however it dies, so a killed serve never blocks the
next start. Only `serve`'s own process holds it; uvicorn's workers do not inherit it.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from voice_service.settings import Settings

LOCK_FILE = "serve.lock"


class ServeLocked(Exception):
    """Another serve holds the lock in a way this one cannot share."""


@dataclass(frozen=True, slots=True)
class ServeLock:
    path: Path
    fd: int  # open for the process's lifetime: closing it would let go of the lock


def _lock_path(settings: Settings) -> tuple[Path, str]:
    """Beside the SQLite file, which is what serves share (in the data dir by default);
    in the data dir for a database server. With what it guards, for messages."""
    database = make_url(settings.resolved_database_url).database
    if settings.is_sqlite and database and database != ":memory:":
        return Path(f"{database}.serve-lock"), f"the database {database}"
    return settings.data_dir / LOCK_FILE, f"the data dir {settings.data_dir.resolve()}"


def hold(settings: Settings) -> ServeLock:
    """Take the lock, or raise ServeLocked with what to do instead."""
    path, guarded = _lock_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    shared = settings.redis_url is not None
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by child processes
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
        os.close(fd)
        raise ServeLocked(_refusal(guarded, holder, shared)) from None
    # The pid tells a refused serve who holds the lock; a shared lock has several holders.
    os.ftruncate(fd, 0)
    if not shared:
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return ServeLock(path, fd)


def _refusal(running_on: str, holder: str, shared: bool) -> str:
    who = f" (pid {holder})" if holder.isdigit() else ""
    if shared:
        return (
            f"a voice-service serve without Redis{who} is running on {running_on}: it "
            "counts rate limits in its own memory, so no other serve may share its "
            "database. Stop it, or restart it with the same VOICE_SERVICE_REDIS_URL."
        )
    return (
        f"another voice-service serve{who} is running on {running_on}. "
        "Without VOICE_SERVICE_REDIS_URL each serve counts rate limits in its own memory, "
        "so two would give every key twice its limit. Stop it first; to run more processes "
        "use one serve with --workers N and VOICE_SERVICE_REDIS_URL, and give several "
        "nodes the same Redis."
    )
