"""The benchmark's in-process steps end to end (`python -m bench --quick --only ...`):
diarization, cloning and what users hear and read; test_bench.py runs the rest."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.quick_bench import (
    IN_PROCESS_FIGURES,
    IN_PROCESS_STEPS,
    assert_described,
    assert_figures,
    quick_run,
)


@pytest.fixture(scope="module")
def in_process_steps(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    results = tmp_path_factory.mktemp("bench-results")
    return quick_run(results, "--only", ",".join(IN_PROCESS_STEPS))


def test_every_figure_is_present_and_numeric(
    in_process_steps: tuple[str, dict[str, Any]],
) -> None:
    _, result = in_process_steps
    assert_figures(result, IN_PROCESS_FIGURES)


def test_the_run_describes_the_machine_and_prints_the_table(
    in_process_steps: tuple[str, dict[str, Any]],
) -> None:
    stdout, result = in_process_steps
    assert_described(stdout, result, set(IN_PROCESS_STEPS))
    assert "clone speaker-similarity gain" in stdout
