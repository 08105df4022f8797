"""A case run in several fresh worker processes (``processes=N``), merged into its one record.

Small cases move between processes more than within one: on the H200 one Triton config
of the RMSNorm-SiLU chain at 16x4096 bf16 ran 6.05, 5.28 and 4.90 us in three processes
(r69-r70; docs/results, the 16-row slow mode), while each process's own median came with
an interval of ~0.05 us. A comparison resting on one process can then rank two impls
either way. Run in N processes, a case's record holds each process's median
(``process_medians_us``); its median is their median and its interval
(``median_lo_us``..``median_hi_us``) their range, so two impls whose ranges overlap are
reported as not told apart (scripts/summarize's ≈), as they should be.

The checks and repeatability of every process must agree: a run that failed, errored or
crashed in any process is the record (with which process it was), never averaged away.
A SIGINT (a sweep's time limit) after some of a case's processes keeps what they measured:
the record merges those (``InterruptedProcesses``), and its reason says how many of how many.
"""
from __future__ import annotations

import statistics

from harness.record import Record

TIMED = ("ok", "fail")   # statuses whose records carry a time


def merge(runs: list[Record]) -> Record:
    """One record of a case from its runs in ``len(runs)`` processes (see the module)."""
    n = len(runs)
    if n == 1:
        return runs[0]
    for i, r in enumerate(runs, 1):
        if r.status not in TIMED or r.median_us is None:
            r.reason = f"in process {i} of {n}: {r.reason}"
            r.processes = n
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
    base.p10_us, base.p90_us = min(r.p10_us for r in runs), max(r.p90_us for r in runs)
    base.spread = (base.p90_us - base.p10_us) / base.median_us if base.median_us else None
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
    """A SIGINT while a case's later processes ran: ``record`` merges the ones that had
    finished, so a time limit landing in process 3 of 3 loses no measurement."""

    def __init__(self, record: Record):
        super().__init__(record.reason)
        self.record = record


def partial(runs: list[Record], n: int) -> Record:
    """The record of the ``len(runs)`` processes of ``n`` that finished before a SIGINT."""
    rec = merge(runs)
    if len(runs) == 1:   # merge() leaves a lone run as it is
        rec.processes, rec.process_medians_us = 1, [rec.median_us] if rec.median_us is not None else []
        rec.derive_rates()
    note = f"interrupted (SIGINT) after {len(runs)} of {n} processes: the record holds those"
    rec.reason = f"{note}; {rec.reason}" if rec.reason else note
    return rec
