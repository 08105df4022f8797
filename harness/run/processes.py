"""A case run in several fresh worker processes (``processes=N``), merged into its one record.

Small cases move between processes more than within one: on the H200 one Triton config
of the RMSNorm-SiLU chain at 16x4096 bf16 ran 6.05, 5.28 and 4.90 us in three processes,
while each process's own median came with an interval of ~0.05 us. A comparison resting on one process can then rank two impls
either way. Run in N processes, a case's record holds each process's median
(``process_medians_us``); its median is their median and its interval
(``median_lo_us``..``median_hi_us``) their range, so two impls whose ranges overlap are
reported as not told apart (harness-results summary's ≈), as they should be.

The checks and repeatability of every process must agree: a run that failed, errored or
crashed in any process is the record (with which process it was), never averaged away.
A SIGINT (a sweep's time limit) after some of a case's processes keeps what they measured:
the record merges those (``InterruptedProcesses``), and its reason says how many of how many.

The cases of one cell (the impls and variants of one op, dtype and shape: what is compared)
run round by round (``run_cell``): every case's first process, then every case's second,
each round starting one case later. Run case after case, a drift of the machine over the
minutes a cell takes (on the H200 ~2 min for three impls' three processes at 16x4096)
would land on one impl; interleaved and rotated, it lands on all of them, and
each impl takes each place in the order once when there are as many rounds as cases.
"""
from __future__ import annotations

import statistics
from typing import Callable

from harness.records.record import Record

TIMED = ("ok", "fail")   # statuses whose records carry a time


def timed(r: Record) -> bool:
    """Whether a process's run measured the case (an error, crash or timeout did not: it is
    the case's record, and the case runs in no further process)."""
    return r.status in TIMED and r.median_us is not None


def merge(runs: list[Record], planned: int | None = None) -> Record:
    """One record of a case from its runs in ``len(runs)`` processes of ``planned`` (default:
    as many as ran; see the module)."""
    n = len(runs)
    planned = planned or n
    if planned == 1:
        return runs[0]
    for i, r in enumerate(runs, 1):
        if not timed(r):
            r.reason = f"in process {i} of {planned}: {r.reason}"
            r.processes = i
            return r
    failed = [r for r in runs if r.status == "fail" or not r.passed]
    base = failed[0] if failed else runs[0]
    if failed and len(failed) < n:
        base.reason = f"failed in {len(failed)} of {n} processes: {base.reason}"
    medians = [r.median_us for r in runs]
    base.processes, base.process_medians_us = n, medians
    base.provenance = {**base.provenance, "worker_pids": [r.provenance.get("worker_pid") for r in runs]}
    base.median_us = statistics.median(medians)
    base.median_lo_us, base.median_hi_us = min(medians), max(medians)
    p10s = [r.p10_us for r in runs if r.p10_us is not None]
    p90s = [r.p90_us for r in runs if r.p90_us is not None]
    base.p10_us, base.p90_us = min(p10s, default=None), max(p90s, default=None)
    base.spread = ((base.p90_us - base.p10_us) / base.median_us
                   if base.median_us and p10s and p90s else None)
    base.samples = sum(r.samples for r in runs)
    base.late_samples = sum(r.late_samples for r in runs)
    base.spin_us = max((r.spin_us for r in runs if r.spin_us is not None), default=None)
    for name in ("graph_us", "sustained_us"):
        values = [getattr(r, name) for r in runs if getattr(r, name) is not None]
        setattr(base, name, statistics.median(values) if values else None)
    # repeatability: the worst any process showed
    distinct = [r.n_distinct for r in runs if r.n_distinct is not None]
    base.n_distinct = max(distinct, default=None)
    spreads = [r.max_ulp_spread for r in runs if r.max_ulp_spread is not None]
    base.max_ulp_spread = max(spreads, default=None)
    if any(r.deterministic is not None for r in runs):
        base.deterministic = all(r.deterministic for r in runs if r.deterministic is not None)
    if any(r.batch_invariant is not None for r in runs):
        base.batch_invariant = all(r.batch_invariant for r in runs if r.batch_invariant is not None)
    base.derive_rates()
    return base


class InterruptedProcesses(KeyboardInterrupt):
    """A SIGINT while a cell's processes ran. ``records`` has one entry per case of the cell:
    the merge of its finished processes (``partial``), or None where none had finished;
    ``running`` is the index of the case whose process the SIGINT cut. A time limit landing
    in round 3 of 3 so loses no measurement."""

    def __init__(self, records: list[Record | None], running: int):
        super().__init__(f"interrupted in case {running + 1} of {len(records)}")
        self.records, self.running = records, running


def rounds(cases: int, n: int) -> list[list[int]]:
    """The order of a cell's ``cases`` in each of ``n`` rounds: round k starts at case k."""
    return [[(k + j) % cases for j in range(cases)] for k in range(n)]


def run_cell(run_fresh: Callable, specs: list, n: int,
             on_process: Callable[[object, int, Record], None] | None = None) -> list[Record]:
    """Each of a cell's cases run in ``n`` fresh processes, round by round (see the module);
    ``run_fresh(spec)`` runs one in a new worker. One record per case, in ``specs``' order.
    ``on_process(spec, k, record)`` hears of each finished process (k from 1). A case whose
    process errored, crashed or timed out runs no more: that is its record (a hang would
    otherwise cost case_timeout_s in every round)."""
    runs: list[list[Record]] = [[] for _ in specs]
    for k, order in enumerate(rounds(len(specs), n), 1):
        for i in order:
            if runs[i] and not timed(runs[i][-1]):   # errored, crashed, timed out: decided
                continue
            try:
                rec = run_fresh(specs[i])
            except KeyboardInterrupt:
                raise InterruptedProcesses([partial(r, n) if r else None for r in runs], i) from None
            runs[i].append(rec)
            if on_process is not None:
                on_process(specs[i], k, rec)
    return [merge(r, n) for r in runs]


def partial(runs: list[Record], n: int) -> Record:
    """The record of the ``len(runs)`` processes of ``n`` that finished before a SIGINT."""
    if not timed(runs[-1]):   # an error, crash or timeout: decided before the SIGINT
        return merge(runs, n)
    rec = merge(runs)
    if len(runs) == 1:   # merge() leaves a lone run as it is
        rec.processes, rec.process_medians_us = 1, [rec.median_us] if rec.median_us is not None else []
        rec.derive_rates()
    note = f"interrupted (SIGINT) after {len(runs)} of {n} processes: the record holds those"
    rec.reason = f"{note}; {rec.reason}" if rec.reason else note
    return rec
