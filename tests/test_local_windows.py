"""The in-memory moving window: exact at its edges, and forgetful of idle keys."""

from __future__ import annotations

from voice_service.ratelimit import LocalWindows


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_at_most_the_limit_in_any_window_and_a_slot_frees_as_its_hit_leaves() -> None:
    clock = Clock()
    windows = LocalWindows(60, clock)
    first = clock.now
    for remaining in (2, 1, 0):
        allowed, quota = windows.hit("key", 3)
        assert allowed and quota.remaining == remaining
        clock.now += 10
    allowed, quota = windows.hit("key", 3)
    assert not allowed
    assert quota.reset_at == first + 60  # when the oldest hit leaves
    clock.now = first + 60  # the first hit is exactly a window old: out
    assert windows.hit("key", 3)[0]
    assert not windows.hit("key", 3)[0]


def test_refused_hits_are_not_counted() -> None:
    clock = Clock()
    windows = LocalWindows(60, clock)
    assert windows.hit("key", 1)[0]
    for _ in range(5):
        clock.now += 1
        assert not windows.hit("key", 1)[0]
    clock.now += 55  # the one counted hit leaves; the refused ones never counted
    assert windows.hit("key", 1)[0]


def test_keys_are_separate_and_idle_ones_are_forgotten() -> None:
    clock = Clock()
    windows = LocalWindows(60, clock)
    assert windows.hit("a", 1)[0]
    assert windows.hit("b", 1)[0]
    assert not windows.hit("a", 1)[0]
    clock.now += 61
    windows.hit("c", 1)
    assert len(windows) == 1
