"""A local, append-only file of request-log rows the database could not take.

A response waits until its row is durable; while the database is unreachable "durable"
means fsync'd here. Rows are replayed into the database oldest first once it answers, and
a replay repeated after a crash adds nothing twice (the request id is the row's key).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from voice_service.books.requestlog.repository import LogEntry

logger = logging.getLogger(__name__)


class SpoolFull(Exception):
    """The spool has reached its size limit; the row exists only in the process log."""


class LogSpool:
    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self._max_bytes = max_bytes
        self._size = path.stat().st_size if path.exists() else 0
        self._replayed = 0  # bytes from the start already in the database

    @property
    def pending(self) -> bool:
        return self._replayed < self._size

    def append(self, entries: Sequence[LogEntry]) -> None:
        """Add rows durably, or raise (SpoolFull, OSError) having added none."""
        data = b"".join(_encode(entry) for entry in entries)
        if self._size + len(data) > self._max_bytes:
            raise SpoolFull(f"the request-log spool {self.path} holds its limit of bytes")
        self._append_bytes(data)

    def adopt(self, other: Path) -> None:
        """Take over the rows of a dead process's spool, ahead of anything new. A write cut
        short by the crash leaves a partial last line: it is dropped, never joined to the
        next row."""
        data = other.read_bytes()
        data = data[: data.rfind(b"\n") + 1]
        if data:
            self._append_bytes(data)  # over the limit if need be: the rows exist already

    def _append_bytes(self, data: bytes) -> None:
        with self.path.open("ab") as file:
            try:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            except OSError:
                file.truncate(self._size)  # no half row for the replay to trip on
                raise
        self._size += len(data)

    def unreplayed(self, limit: int) -> tuple[list[LogEntry], int]:
        """Up to `limit` rows not yet replayed, oldest first, and where they end."""
        entries: list[LogEntry] = []
        with self.path.open("rb") as file:
            file.seek(self._replayed)
            end = self._replayed
            while len(entries) < limit and end < self._size:
                line = file.readline()
                end += len(line)
                entry = _decode(line)
                if entry is not None:
                    entries.append(entry)
        return entries, end

    def replayed(self, end: int) -> None:
        """Rows up to `end` are in the database; an emptied spool starts over at zero."""
        self._replayed = end
        if self._replayed == self._size:
            with self.path.open("r+b") as file:
                file.truncate(0)
                os.fsync(file.fileno())
            self._size = self._replayed = 0


def _encode(entry: LogEntry) -> bytes:
    row = {**asdict(entry), "created_at": entry.created_at.isoformat()}
    return json.dumps(row, separators=(",", ":")).encode() + b"\n"


def _decode(line: bytes) -> LogEntry | None:
    try:
        row: dict[str, Any] = json.loads(line)
        row["created_at"] = datetime.fromisoformat(row["created_at"])
        return LogEntry(**row)
    except (ValueError, TypeError, KeyError):
        logger.error("skipping an unreadable request-log spool line: %r", line[:200])
        return None
