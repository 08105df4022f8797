"""Regression detection: this night's records against each case's history.

A case is the key (op, series, variant, dtype, shape, GPU model): the series is the impl,
labelled with any framework setting that makes a series of its own (record.Record.series).
Against the key's history
(its last ``history`` nights on the tracking server, or one pinned baseline night):

  slowdown     median time above the history's median by more than the threshold
  correctness  checks fail where the latest history passed (negative controls excepted)
  determinism  several bit patterns where the latest history had one
  broken       error / crash / timeout / oom where the latest history ran
and the reverse of each as an improvement; keys with no history are new; keys of the
latest history night that this night lacks (or now skips) have vanished.

The threshold is noise-aware: the larger of ``min_effect`` and ``noise_k`` times the noise,
where the noise is the largest of this run's spread, the history's last run's spread, and the
history's medians across nights; and a change must also exceed ``min_abs_us`` (a
few-microsecond case jitters by that much). A run's spread is its fast side doubled,
2 (median - p10) / median: interference only makes a sample late, so the slow side measures
the host, not the case, and a few late samples must not widen the threshold over a real
slowdown (a loaded CPU's late sleeps put one night's p90 at 2.3x its median and hid +184%).
A case with two speeds keeps a narrow threshold while its slow share stays under half; a night
where that share passes half moves the median and is flagged, until the nights' scatter
(across) shows the case moves so.
A CPU's times are no GPU measurements: an interpreter's (a GPU kernel run on the CPU) are
never compared, and a CPU's wall clock counts only beyond CPU_WALL_FLOOR.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from harness.records.reader import gpu_model
from harness.records.record import Record
from harness.records.sinks.mlflow import search_all

BROKEN = ("invalid", "error", "crash", "timeout", "oom")
RAN = ("ok", "fail")
# A CPU's wall clock, even on the one thread a CPU case runs on (harness.run.runner), moves with
# the other processes on the cores: eager RMSNorm fp32 4x4096 took 10.8 us alone and 12.5 us
# beside two busy processes, and with PyTorch's two threads 16.7 us and 14,170 us. A CPU
# time counts as changed only where it more than doubled or halved.
CPU_WALL_FLOOR = 1.0
INTERPRETER = "wall_interpreter"   # harness.measure.timing's label of an interpreter's wall clock
CPU_WALL = "wall"


@dataclass(frozen=True)
class Thresholds:
    min_effect: float = 0.05     # never flag a change smaller than this (relative)
    noise_k: float = 2.0         # ... or smaller than this many times the measured noise
    min_abs_us: float = 1.0      # ... or smaller than this in absolute time (event resolution, jitter)
    history: int = 7             # nights of history per case


@dataclass
class Point:
    """One measurement of a case: from a record (this night) or a tracking-server run."""

    key: tuple
    when_ms: int
    status: str
    passed: bool | None
    deterministic: bool | None
    median_us: float | None
    p10_us: float | None
    negative_control: bool = False
    reason: str = ""
    source: str = ""             # where it came from (an MLflow run id, or a record id)
    timer: str = ""              # harness.measure.timing's label: cuda_events, wall, wall_interpreter

    @property
    def spread(self) -> float:
        """The fast side doubled (see the module's docstring)."""
        if not (self.median_us and self.p10_us is not None):
            return 0.0
        return 2 * (self.median_us - self.p10_us) / self.median_us


def key_of(op, series, variant, dtype, shape, gpu) -> tuple:
    return (op, series, variant, dtype, shape, gpu or "cpu")


def point_from_record(r: Record, when_ms: int = 0) -> Point:
    return Point(key_of(r.op, r.series, r.variant, r.dtype, r.shape_str, gpu_model(r)),
                 when_ms, r.status, r.passed,
                 r.deterministic, r.median_us, r.p10_us, r.negative_control, r.reason, r.record_id,
                 r.timer)


@dataclass
class Finding:
    kind: str
    key: tuple
    detail: str


@dataclass
class Report:
    regressions: list[Finding] = field(default_factory=list)
    improvements: list[Finding] = field(default_factory=list)
    new: list[Finding] = field(default_factory=list)
    vanished: list[Finding] = field(default_factory=list)
    compared: int = 0

    def markdown(self, title: str, notes: list[str] = ()) -> str:
        lines = [f"# {title}", ""]
        lines += [f"- {n}" for n in notes]
        lines += [f"- {self.compared} cases compared: {len(self.regressions)} regressions, "
                  f"{len(self.improvements)} improvements, {len(self.new)} new, {len(self.vanished)} vanished", ""]
        for heading, items in (("Regressions", self.regressions), ("Improvements", self.improvements),
                               ("New cases", self.new), ("Vanished cases", self.vanished)):
            lines += [f"## {heading} ({len(items)})", ""]
            if items:
                lines += ["| kind | op | impl | variant | dtype | shape | GPU | detail |",
                          "|---|---|---|---|---|---|---|---|"]
                lines += [f"| {f.kind} | " + " | ".join(map(str, f.key)) + f" | {f.detail} |" for f in items]
            else:
                lines.append("none")
            lines.append("")
        return "\n".join(lines)


def compare(current: list[Point], history: dict[tuple, list[Point]], th: Thresholds) -> Report:
    """``history[key]``: earlier points of the key, oldest first."""
    rep = Report()
    seen = set()
    for p in current:
        seen.add(p.key)
        past = history.get(p.key, [])[-th.history:]
        if not past:
            if p.status != "skipped":
                timed = f", {p.median_us:.1f} us" if p.median_us else ""
                rep.new.append(Finding("new", p.key, f"{p.status}{timed}"))
            continue
        last = past[-1]
        if p.status == "skipped":
            if last.status != "skipped":
                rep.vanished.append(Finding("now skipped", p.key, p.reason[:200]))
            continue
        rep.compared += 1
        if p.status in BROKEN and last.status in RAN:
            rep.regressions.append(Finding("broken", p.key, f"{last.status} -> {p.status}: {p.reason[:200]}"))
            continue
        if p.status in RAN and last.status in BROKEN:
            rep.improvements.append(Finding("runs again", p.key, f"{last.status} -> {p.status}"))
        if not p.negative_control:
            if p.passed is False and last.passed is True:
                rep.regressions.append(Finding("correctness", p.key, f"passed -> fails: {p.reason[:200]}"))
            elif p.passed is True and last.passed is False:
                rep.improvements.append(Finding("correctness", p.key, "failed -> passes"))
        if p.deterministic is False and last.deterministic is True:
            rep.regressions.append(Finding("determinism", p.key, "1 bit pattern -> several"))
        elif p.deterministic is True and last.deterministic is False:
            rep.improvements.append(Finding("determinism", p.key, "several bit patterns -> 1"))
        _timing(p, past, th, rep)
    latest_night = _latest_night(history)
    for key, pts in history.items():
        if key not in seen and pts and pts[-1].when_ms >= latest_night and pts[-1].status != "skipped":
            rep.vanished.append(Finding("vanished", key, f"last seen with status {pts[-1].status}"))
    return rep


def _latest_night(history: dict[tuple, list[Point]]) -> int:
    """Start of the most recent history night (its points are within an hour of its last)."""
    newest = max((pts[-1].when_ms for pts in history.values() if pts), default=0)
    return newest - 12 * 3600 * 1000


def _timing(p: Point, past: list[Point], th: Thresholds, rep: Report) -> None:
    timed = [q for q in past if q.median_us and q.status in RAN]
    if not (p.median_us and timed) or INTERPRETER in {p.timer, *(q.timer for q in timed)}:
        return
    medians = [q.median_us for q in timed]
    base = statistics.median(medians)
    across = (max(medians) - min(medians)) / base if len(medians) > 1 else 0.0
    noise = max(p.spread, timed[-1].spread, across)
    threshold = max(th.min_effect, th.noise_k * noise)
    floor = ""
    if CPU_WALL in {p.timer, *(q.timer for q in timed)} and threshold < CPU_WALL_FLOOR:
        threshold, floor = CPU_WALL_FLOOR, ", the CPU wall clock's floor"
    ratio = p.median_us / base
    detail = (f"{base:.1f} -> {p.median_us:.1f} us ({ratio - 1:+.1%}; threshold {threshold:.1%} "
              f"from noise {noise:.1%}{floor}, {len(timed)} nights)")
    if abs(p.median_us - base) < th.min_abs_us:
        return
    if ratio > 1 + threshold:
        rep.regressions.append(Finding("slowdown", p.key, detail))
    elif ratio < 1 / (1 + threshold):
        rep.improvements.append(Finding("speedup", p.key, detail))


# --- history from the tracking server ----------------------------------------------------

def _series_of_run(prm: dict) -> str:
    """A case run without a series param (users' servers hold such runs): its series from its
    ``config.<key>`` params, by its framework's declaration."""
    from harness.registry import series_of
    return series_of(prm["impl"], {k[len("config."):]: v for k, v in prm.items() if k.startswith("config.")})


def point_from_run(run) -> Point | None:
    prm, met, tags = run.data.params, run.data.metrics, run.data.tags
    try:
        key = key_of(prm["op"], prm.get("series") or _series_of_run(prm), prm["variant"], prm["dtype"], prm["shape"],
                     tags.get("gpu"))
    except KeyError:
        return None

    def flag(name):
        return None if name not in met else bool(met[name])

    return Point(key, run.info.start_time, tags.get("status", "error"), flag("passed"), flag("deterministic"),
                 met.get("median_us"), met.get("p10_us"),
                 tags.get("negative_control") == "true", tags.get("reason", ""), run.info.run_id,
                 tags.get("timer", ""))


def load_history(client, experiment_id: str, *, group: str | None = None, before_ms: int | None = None,
                 baseline: str | None = None, exclude_parent: str | None = None) -> dict[tuple, list[Point]]:
    """Case runs of earlier nights (``group``, started before ``before_ms``), or of one pinned
    ``baseline`` night (a night run id), grouped by key, oldest first."""
    clauses = ["tags.`harness.kind` = 'case'"]
    if baseline:
        clauses.append(f"tags.`harness.parent` = '{baseline}'")
    elif group:
        clauses.append(f"tags.`harness.group` = '{group}'")
    if before_ms and not baseline:
        clauses.append(f"attributes.start_time < {int(before_ms)}")
    history: dict[tuple, list[Point]] = defaultdict(list)
    for run in search_all(client, [experiment_id], " and ".join(clauses)):
        if exclude_parent and run.data.tags.get("harness.parent") == exclude_parent:
            continue
        pt = point_from_run(run)
        if pt is not None:
            history[pt.key].append(pt)
    for pts in history.values():
        pts.sort(key=lambda q: q.when_ms)
    return dict(history)
