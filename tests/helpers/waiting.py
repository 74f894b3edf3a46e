"""Waiting for what a server does in its own time, with a bound generous enough for a
loaded CI machine."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(probe: Callable[[], T], patience: float = 60.0) -> T:
    """`probe`'s first truthy value within `patience` seconds, else its last value."""
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.1)
    return probe()
