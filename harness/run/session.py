"""A run's cases, each a record, in the order they run: the one loop that runs them.

``Session.records`` yields every case's record once, also where it did not run: a case the
plan skips, the cases after a SIGINT (skipped, ``NOT_RUN``), the cases after the results
file refused a record (skipped, ``NOT_WRITTEN``). Cases run a cell at a time (``cells``):
one case, or with ``processes`` > 1 the impls of one op, dtype and shape, interleaved over
fresh workers (harness.run.processes).

With one process, a case whose framework is still building in the background
(Framework.warm: the CUDA extension's build) is held back while other cases can run, and
runs as soon as the build is over: its record comes later than the plan's order, and the
run does not wait for a build while other cases are left. With ``processes`` > 1 a cell
holds the impls compared, so a building one's bind waits for the build instead.

SIGINT is held from the first case to the last record (harness.run.interrupts) and released
only while a case runs: there it is caught, the case keeps what it measured, and every
case after it is recorded as not run. A record is never cut between its measurement and
its writing by the code that takes it from ``records`` (the sinks), which runs held.
"""
from __future__ import annotations

import sys
from typing import Callable, Iterator

from harness.run.interrupts import SigintHold
from harness.run.processes import InterruptedProcesses, run_cell
from harness.run.progress import RunProgress
from harness.records.record import INTERRUPTED, NOT_RUN, Record, case_label
from harness.run.runner import CaseSpec, Settings, base_record

CUT = "interrupted: the remaining cases are recorded as skipped"
NOT_WRITTEN = "not run: the run stopped where its results file could not take a record"


class Session:
    """The cases of a plan run by the runner ``make_runner()`` builds at the first case
    (an isolated one's worker starts there, not before a run that runs nothing). After
    ``records``: ``done``, every record in the order it came, and ``interrupted``."""

    def __init__(self, cases: list[CaseSpec], processes: int, device, settings: Settings,
                 make_runner: Callable[[], object], building: Callable[[str], bool] = lambda impl: False):
        self.cases, self.processes, self.device, self.settings = cases, processes, device, settings
        self.make_runner = make_runner
        self.building = building   # impl -> whether its framework's background build is still going
        self.runner = None
        self.done: list[Record] = []
        self.interrupted = False

    def records(self, progress: RunProgress, halted: Callable[[], str] = lambda: "") -> Iterator[Record]:
        """Each case's record as it exists; ``halted()``: why no more cases may run (the
        results file's error), or "". The runner is stopped after the last."""
        try:
            with SigintHold() as hold:
                for cell in self._in_run_order(cells(self.cases, self.processes)):
                    why = halted()
                    measured = {} if self.interrupted or why else self._cell(cell, progress, hold)
                    for spec in cell:
                        yield self._record(spec, measured.get(id(spec)), halted())
        except KeyboardInterrupt:   # one that waited for the loop's end: every record is kept
            self.interrupted = True
        self.interrupted = stop(self.runner, self.interrupted)

    def _in_run_order(self, planned: list[list[CaseSpec]]) -> Iterator[list[CaseSpec]]:
        """``planned``, except that a one-case cell whose framework is still building waits
        until the build is over or no other cell is left. Asked once per framework before
        each cell, so that a framework's own cases keep their order."""
        held: list[list[CaseSpec]] = []
        for cell in planned:
            asked: dict[str, bool] = {}
            still = [self._building(c, asked) for c in held]
            yield from [c for c, b in zip(held, still) if not b]
            held = [c for c, b in zip(held, still) if b]
            if len(cell) == 1 and self._building(cell, asked):
                held.append(cell)
            else:
                yield cell
        yield from held

    def _building(self, cell: list[CaseSpec], asked: dict[str, bool]) -> bool:
        if self.interrupted:
            return False
        for s in cell:
            if not s.skip_reason and s.impl not in asked:
                asked[s.impl] = self.building(s.impl)
        return any(asked.get(s.impl, False) for s in cell if not s.skip_reason)

    def _cell(self, cell: list[CaseSpec], progress: RunProgress, hold: SigintHold) -> dict[int, Record]:
        runnable = [spec for spec in cell if not spec.skip_reason]
        if not runnable:
            return {}
        first = runnable[0]
        progress.case(case_label(first.op, first.impl, first.variant, first.dtype, first.shape)
                      if self.processes == 1 else
                      f"{first.op} {first.dtype} {'x'.join(map(str, first.shape))}: {len(runnable)} "
                      f"impls, {self.processes} processes each")
        try:
            with hold.released():
                if self.runner is None:
                    self.runner = self.make_runner()
                measured, cut = measure(self.runner, runnable, self.processes, self.device, self.settings)
        except KeyboardInterrupt:   # as the runner started, or one that waited for this case
            measured, cut = {}, True
        if cut:
            self.interrupted = True
            print(f"harness: {CUT}", file=sys.stderr)
        return measured

    def _record(self, spec: CaseSpec, rec: Record | None, why_halted: str) -> Record:
        if rec is None:
            rec = base_record(spec, self.device, self.settings, {})
            if self.interrupted and not spec.skip_reason:
                rec.status, rec.reason = "skipped", NOT_RUN
            elif why_halted and not spec.skip_reason:
                rec.status, rec.reason = "skipped", f"{NOT_WRITTEN}: {why_halted}"
        rec.invocation_id, rec.plan_cases = self.settings.invocation_id, len(self.cases)
        self.done.append(rec)
        return rec


def measure(runner, runnable: list[CaseSpec], processes: int, device, settings: Settings
            ) -> tuple[dict[int, Record], bool]:
    """A cell's runnable cases run (``runner.run``, or ``processes`` rounds of fresh workers):
    their records by ``id(spec)``, and whether a SIGINT cut the cell. Cut, a case keeps the
    merge of its finished processes; the one the SIGINT landed in, with none, is an error;
    the cases it had not reached have no record (the caller marks them skipped)."""
    try:
        if processes == 1:
            return {id(runnable[0]): runner.run(runnable[0])}, False
        merged = run_cell(runner.run_fresh, runnable, processes,
                          lambda spec, k, rec: _process_done(k, processes, rec))
        return {id(spec): rec for spec, rec in zip(runnable, merged)}, False
    except KeyboardInterrupt as e:
        kept = e.records if isinstance(e, InterruptedProcesses) else [None]
        running = e.running if isinstance(e, InterruptedProcesses) else 0
        measured = {}
        for j, (spec, rec) in enumerate(zip(runnable, kept)):
            if rec is None and j == running:
                rec = base_record(spec, device, settings, {})
                rec.status, rec.reason = "error", INTERRUPTED
            if rec is not None:
                measured[id(spec)] = rec
        return measured, True


def cells(cases: list[CaseSpec], processes: int) -> list[list[CaseSpec]]:
    """The plan's cases in the groups that run together: with ``processes`` > 1 a cell, the
    consecutive cases of one op, dtype and shape (the plan is shape-major), whose processes
    interleave (harness.run.processes.run_cell); with one process a case at a time."""
    groups: list[list[CaseSpec]] = []
    for spec in cases:
        if processes > 1 and groups and _cell_key(groups[-1][0]) == _cell_key(spec):
            groups[-1].append(spec)
        else:
            groups.append([spec])
    return groups


def _cell_key(spec: CaseSpec) -> tuple:
    return spec.op, spec.dtype, spec.shape


def _process_done(k: int, n: int, rec: Record) -> None:
    """A line for each finished process of a cell, whose records come when all its rounds have run."""
    time = f"{rec.median_us:.2f} us" if rec.median_us is not None else rec.status
    print(f"  process {k} of {n}: {rec.case_label}: {time}", flush=True)


def stop(runner, interrupted: bool) -> bool:
    """Stop the case runner (an isolated one's worker process); whether the run was
    interrupted. A SIGINT while the worker winds down (a time limit landing just after
    the last case, which would otherwise cost the run its table, though not its records:
    those are in the JSONL) kills the worker instead, and the table and the MLflow parent
    run still follow."""
    if runner is None or not hasattr(runner, "stop"):
        return interrupted
    try:
        runner.stop(kill=interrupted)
    except KeyboardInterrupt:
        print("harness: interrupted while the worker stopped: killed it", file=sys.stderr)
        runner.stop(kill=True)
        return True
    return interrupted
