"""A process's delivery slots, shared fairly: an organization holds at most `share` of them
at once, so receivers one organization points at slow or silent servers never leave
another's deliveries waiting for a slot. An attempt refused a slot is put off (the
caller queues it again), never held waiting inside one."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager


class FairShares:
    def __init__(self, share: int) -> None:
        self.share = share
        self.held: Counter[str] = Counter()  # slots each organization holds now
        self.peak: Counter[str] = Counter()  # the most each has held at once
        self.deferred: Counter[str] = Counter()  # attempts put off for want of a slot

    @contextmanager
    def slot(self, org_id: str) -> Iterator[bool]:
        """Whether the organization may attempt now (True: a slot is held until the block
        ends); False is counted as a deferral."""
        if self.held[org_id] >= self.share:
            self.deferred[org_id] += 1
            yield False
            return
        self.held[org_id] += 1
        self.peak[org_id] = max(self.peak[org_id], self.held[org_id])
        try:
            yield True
        finally:
            self.held[org_id] -= 1
            if not self.held[org_id]:
                del self.held[org_id]
