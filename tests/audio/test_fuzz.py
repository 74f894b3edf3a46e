"""Mutated files of every accepted format: refused or decoded, never anything else.

The short, deterministic version of `python -m tests.audio.fuzz` (see that module for the
long run): byte flips, truncations, insertions, header-field overwrites, chunk duplication
and Ogg re-checksumming over quarter-second seeds of every variant, run in-process.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.audio import fuzzing as fz

SEEDS = fz.build_seeds()

mutations = st.builds(
    fz.Mutation,
    kind=st.sampled_from(fz.KINDS),
    at=st.floats(min_value=0.0, max_value=1.0),
    size=st.integers(min_value=1, max_value=fz.MAX_CHUNK),
    value=st.integers(min_value=0, max_value=2**32 - 1),
)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@settings(
    max_examples=500,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    variant=st.sampled_from(sorted(SEEDS)),
    changes=st.lists(mutations, min_size=1, max_size=4),
)
def test_mutated_upload_is_decoded_or_refused(
    scratch: Path, variant: str, changes: list[fz.Mutation]
) -> None:
    outcome = fz.run_case(fz.mutate(SEEDS[variant], changes), scratch)
    assert outcome in fz.EXPECTED_OUTCOMES


# Inputs the fuzz harness once found, kept as they were (named for what they did): a native
# crash, a resampler error and a MemoryError that escaped as a 500.
CORPUS = Path(__file__).parent / "corpus"


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.bin")), ids=lambda p: p.stem)
def test_past_findings_are_decoded_or_refused(scratch: Path, path: Path) -> None:
    assert fz.run_case(path.read_bytes(), scratch) in fz.EXPECTED_OUTCOMES


@pytest.mark.parametrize("variant", sorted(SEEDS))
def test_every_seed_decodes(scratch: Path, variant: str) -> None:
    assert fz.run_case(SEEDS[variant], scratch) == "decoded"


def test_every_format_is_seeded() -> None:
    assert {fz.variant_format(v) for v in SEEDS} == set(fz.FORMATS)


def test_cases_are_deterministic() -> None:
    assert fz.random_case(SEEDS, 7, 123) == fz.random_case(SEEDS, 7, 123)
    assert fz.random_case(SEEDS, 7, 123) != fz.random_case(SEEDS, 7, 124)
