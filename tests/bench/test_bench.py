"""The benchmark harness runs end to end (`python -m bench --quick`), so it cannot rot: the
steps that call a running node here, the in-process ones in test_bench_in_process.py (the
suite's two processes take the halves at once)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.quick_bench import (
    IN_PROCESS_STEPS,
    SERVED_FIGURES,
    assert_described,
    assert_figures,
    quick_run,
)


@pytest.fixture(scope="module")
def served_steps(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    results = tmp_path_factory.mktemp("bench-results")
    return quick_run(results, "--without", ",".join(IN_PROCESS_STEPS))


def test_every_figure_is_present_and_numeric(served_steps: tuple[str, dict[str, Any]]) -> None:
    _, result = served_steps
    assert_figures(result, SERVED_FIGURES)
    assert result["without"] == sorted(IN_PROCESS_STEPS)


def test_the_run_describes_the_machine_and_prints_the_table(
    served_steps: tuple[str, dict[str, Any]],
) -> None:
    stdout, result = served_steps
    assert_described(stdout, result, {"stt", "jobs", "realtime"})
    assert "full stack / bare throughput" in stdout
