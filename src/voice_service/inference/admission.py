"""Admission to the inference pool: what each job is, and how long each capability's queue
may grow before a request is better off retried (here later, or on another node).

Every capability shares the pool's slots; the bound is per capability, so a burst of one
kind (long transcriptions) cannot fill the queue that speech requests wait in.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from enum import IntEnum

from voice_service.core.vocabulary import Capability

# Weight of the newest job in the running mean: about the last ten jobs count, so the
# estimate follows a change of load (short texts, then long files) within a few jobs.
EWMA_WEIGHT = 0.2


class Priority(IntEnum):
    """Which step a free inference slot goes to first: the lowest value waiting."""

    LIVE = 0  # a live-transcription turn: a caller is waiting mid-conversation
    FIRST = 1  # a request's first step: its first audio, its first segment
    LATER = 2  # a later step of a request under way
    BATCH = 3  # a transcription job's, and the measuring of one's upload: below requests


@dataclass(frozen=True, slots=True)
class Job:
    """What a pool call does: the capability it queues under and the engine that runs it;
    `abandoned` is set when whoever asked for it no longer wants it (its client left);
    `live` for a live-transcription turn, `batch` for a transcription job's piece (or its
    upload's measuring)."""

    capability: Capability
    engine: str
    abandoned: asyncio.Event | None = field(default=None, compare=False)
    live: bool = False
    batch: bool = False

    def priority(self, step: int) -> Priority:
        """The priority of its `step`-th step (from 0)."""
        if self.live:
            return Priority.LIVE
        if self.batch:
            return Priority.BATCH
        return Priority.FIRST if step == 0 else Priority.LATER


@dataclass(slots=True)
class CapabilityQueue:
    """One capability's requests: waiting for a slot, holding one, and how long a slot
    stays held (a running mean)."""

    waiting: int = 0
    running: int = 0
    mean_seconds: float | None = None  # None until a job of this capability has finished

    def finished(self, held_seconds: float) -> None:
        if self.mean_seconds is None:
            self.mean_seconds = held_seconds
        else:
            self.mean_seconds += EWMA_WEIGHT * (held_seconds - self.mean_seconds)

    def retry_after(self, slots: int) -> int:
        """Whole seconds until this queue, and this request, would have had a slot: the
        waiting requests and this one, each holding a slot for the mean, `slots` at a time.
        At least 1; 1 before any job has been measured."""
        if self.mean_seconds is None:
            return 1
        return max(1, math.ceil((self.waiting + 1) * self.mean_seconds / slots))
