"""Fuzz the upload path (sniff, probe, decode) over mutated files of every accepted format.

    python -m tests.audio.fuzz --count 100000 [--seed 0] [--workers 2] [--out fuzz-findings]

Case `i` of seed `s` is the same bytes on every run (see `fuzzing.random_case`), so a
finding is replayed from its number alone; its bytes are saved as well. Cases run in worker
processes, so a native crash or a hang costs one worker (restarted), not the run. Exits 1
when anything but decoded audio or an expected refusal came out.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import resource
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.context import SpawnProcess
from pathlib import Path

from tests.audio import fuzzing as fz


@dataclass(frozen=True, slots=True)
class Case:
    index: int
    variant: str
    data: bytes


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    seeds = fz.build_seeds()
    cases = (Case(i, *fz.random_case(seeds, args.seed, i)) for i in range(args.count))
    report = Report(args.out)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        pool = [Worker(Path(scratch), args.memory_mb) for _ in range(args.workers)]
        try:
            _run(cases, pool, report, args.timeout)
        finally:
            for worker in pool:
                worker.stop()
    report.print(args, time.monotonic() - started)
    return 1 if report.findings else 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.audio.fuzz", description=__doc__)
    parser.add_argument("--count", type=int, default=10_000, help="cases to run")
    parser.add_argument("--seed", type=int, default=0, help="run seed (deterministic)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds before a hang")
    parser.add_argument("--memory-mb", type=int, default=4096, help="address space per worker")
    parser.add_argument("--out", type=Path, default=Path("fuzz-findings"), help="findings")
    return parser.parse_args(argv)


def _run(cases: Iterator[Case], pool: list[Worker], report: Report, timeout: float) -> None:
    pending = True
    while True:
        for worker in pool:
            if worker.case is None and pending:
                case = next(cases, None)
                pending = case is not None
                if case is not None:
                    worker.submit(case)
        busy = [w for w in pool if w.case is not None]
        if not busy:
            return
        ready = wait([w.conn for w in busy], timeout=min(1.0, timeout))
        for worker in busy:
            if worker.conn in ready or worker.overdue(timeout):
                case, outcome = worker.collect(timeout)
                report.add(case, outcome)


class Worker:
    """A child process running cases one at a time; replaced when it dies or hangs."""

    def __init__(self, scratch: Path, memory_mb: int) -> None:
        self._scratch = scratch
        self._memory_mb = memory_mb
        self.case: Case | None = None
        self._submitted = 0.0
        self._start()

    def _start(self) -> None:
        context = mp.get_context("spawn")
        self.conn, child = context.Pipe()
        self._process: SpawnProcess = context.Process(
            target=_serve, args=(child, self._scratch, self._memory_mb), daemon=True
        )
        self._process.start()
        child.close()

    def submit(self, case: Case) -> None:
        self.case = case
        self._submitted = time.monotonic()
        with contextlib.suppress(OSError):  # the worker is gone; collect() says how
            self.conn.send_bytes(case.data)

    def overdue(self, timeout: float) -> bool:
        return time.monotonic() - self._submitted > timeout

    def collect(self, timeout: float) -> tuple[Case, str]:
        case, self.case = self.case, None
        assert case is not None
        if not self.conn.poll():
            outcome = f"hang:no answer in {timeout:g} s"
        else:
            try:
                return case, str(self.conn.recv())
            except (EOFError, OSError):
                outcome = self._died()
        self.stop()
        self._start()
        return case, outcome

    def _died(self) -> str:
        self._process.join(5)
        code = self._process.exitcode
        return f"crash:killed by signal {-code}" if code and code < 0 else f"crash:exit {code}"

    def stop(self) -> None:
        self.conn.close()
        if self._process.is_alive():
            self._process.kill()
        self._process.join(5)


def _serve(conn: Connection, scratch: Path, memory_mb: int) -> None:
    # A decoder that allocates without bound is a finding (MemoryError), not a frozen box.
    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    while True:
        try:
            data = conn.recv_bytes()
        except EOFError:
            return
        conn.send(fz.run_case(data, scratch))


@dataclass
class Report:
    out: Path
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    findings: list[tuple[Case, str]] = field(default_factory=list)

    def add(self, case: Case, outcome: str) -> None:
        kind = outcome if outcome in fz.EXPECTED_OUTCOMES else outcome.split(":")[0]
        self.counts[fz.variant_format(case.variant), kind] += 1
        if outcome not in fz.EXPECTED_OUTCOMES:
            self.findings.append((case, outcome))
            self._save(case, outcome)
        total = sum(self.counts.values())
        if total % 10_000 == 0:
            print(f"... {total} cases, {len(self.findings)} findings", file=sys.stderr)

    def _save(self, case: Case, outcome: str) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        stem = self.out / f"case-{case.index}-{case.variant}"
        stem.with_suffix(".bin").write_bytes(case.data)
        stem.with_suffix(".txt").write_text(f"{outcome}\n")
        print(f"FINDING case {case.index} ({case.variant}): {outcome[:300]}", file=sys.stderr)

    def print(self, args: argparse.Namespace, seconds: float) -> None:
        kinds = sorted({kind for _, kind in self.counts})
        print(f"fuzz: {sum(self.counts.values())} cases, seed {args.seed}, {seconds:.0f} s")
        print(f"{'format':<8}" + "".join(f"{k:>18}" for k in kinds) + f"{'total':>10}")
        for fmt in fz.FORMATS:
            row = [self.counts[fmt, k] for k in kinds]
            print(f"{fmt:<8}" + "".join(f"{n:>18}" for n in row) + f"{sum(row):>10}")
        totals = [sum(self.counts[f, k] for f in fz.FORMATS) for k in kinds]
        print(f"{'all':<8}" + "".join(f"{n:>18}" for n in totals) + f"{sum(totals):>10}")
        saved = f" (saved in {self.out})" if self.findings else ""
        print(f"findings: {len(self.findings)}{saved}")


if __name__ == "__main__":
    sys.exit(main())
