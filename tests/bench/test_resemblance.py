"""The arithmetic of figure 20 (bench/resemblance.py): a verifier's equal-error threshold,
and resemblance normalised between strangers and the person."""

from __future__ import annotations

import pytest
from bench.resemblance import Row, equal_error


def test_the_equal_error_threshold_rejects_as_many_of_the_same_as_it_accepts_of_others() -> None:
    threshold, rate = equal_error(same=[0.9, 0.8, 0.7, 0.6], different=[0.1, 0.2, 0.3, 0.65])
    assert threshold == 0.65  # rejects one in four of the same, accepts one in four others
    assert rate == pytest.approx(0.25)


def test_verifiers_that_never_confuse_people_have_no_equal_error() -> None:
    threshold, rate = equal_error(same=[0.9, 0.8], different=[0.1, 0.2])
    assert 0.2 < threshold <= 0.8 and rate == 0


@pytest.mark.parametrize(("clone", "normalised"), [(0.4, 0.0), (0.9, 1.0), (0.65, 0.5)])
def test_resemblance_is_zero_at_strangers_and_one_at_the_person(
    clone: float, normalised: float
) -> None:
    row = Row("x", "en", "held-out", own=0.9, strangers=0.4, clone=clone, nearest="x")
    assert row.normalised == pytest.approx(normalised)
