"""The console table: per op and dtype, one row per case, then GB/s as impl x shape."""
from __future__ import annotations

from collections import defaultdict

from harness.records.record import Record, cache_bytes


def _f(v, fmt: str, empty: str = "-") -> str:
    return empty if v is None else format(v, fmt)


def status_label(r: Record) -> str:
    if r.negative_control and r.status in ("ok", "fail"):
        return "xfail" if r.status == "fail" else "XPASS"
    return {"fail": "FAIL", "invalid": "INVALID", "error": "ERROR", "crash": "CRASH", "oom": "OOM",
            "timeout": "TIMEOUT"}.get(r.status, r.status)


def _det(r: Record) -> str:
    if r.n_distinct is None:
        return "-"
    return "yes" if r.deterministic else f"no({r.n_distinct})"


def _binv(r: Record) -> str:
    return "-" if r.batch_invariant is None else ("yes" if r.batch_invariant else "no")


# A case whose samples spread this much ((p90 - p10) / median) is marked noisy: on a CPU,
# torch.compile's threads fighting for two cores spread 8-16 ms around eager's 50 us.
NOISY_SPREAD = 0.25


def noisy(r: Record) -> bool:
    return r.spread is not None and r.spread > NOISY_SPREAD and r.processes == 1


def in_cache(r: Record) -> bool:
    """A CPU case small enough to sit in the CPU's cache between launches (nothing flushes it
    there): its GB/s are the cache's, not memory's. A GPU case is flushed before each sample."""
    limit = (r.provenance or {}).get("cpu_cache_bytes")
    return r.timer == "wall" and bool(limit) and r.bytes <= limit


def sig(v: float | None) -> str:
    """Three significant digits, no exponent for the GB/s a table shows (0.0312, 3.12, 312, 4291)."""
    if v is None:
        return "-"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def marks(r: Record) -> str:
    """What a time needs beside it to be read right: ``*`` an interpreter's, ``~`` noisy,
    ``c`` in the CPU's cache (the table's legend, ``legend``, says each)."""
    return ("*" if r.timer == "wall_interpreter" else "") + ("~" if noisy(r) else "") + ("c" if in_cache(r) else "")


def _time(r: Record) -> str:
    return "-" if r.median_us is None else f"{r.median_us:.1f}{marks(r)}"


def progress_line(r: Record) -> str:
    """A finished case in one line, as the run goes: its status, time and GB/s, or why not."""
    head = f"{r.case_label}: {status_label(r)}"
    if r.process_medians_us:
        head += (f" (median of {r.processes} process{'es' if r.processes != 1 else ''}: "
                 + ", ".join(f"{m:.2f}" for m in r.process_medians_us) + " us)")
    if r.status == "ok" and r.reason:   # e.g. interrupted after 2 of 3 processes
        head += f" [{r.reason[:160]}]"
    if r.gbps is not None:
        pct = f", {r.pct_roof:.1f}% of roof" if r.pct_roof is not None else ""
        return f"{head} {r.median_us:.1f} us, {sig(r.gbps)} GB/s{pct}"
    if r.median_us is not None:
        return f"{head} {r.median_us:.1f} us ({r.timer})"
    return f"{head} {r.reason[:200]}" if r.reason else head


COLUMNS = [("shape", 13, lambda r: r.shape_str), ("impl", 26, lambda r: r.impl_label),
           ("time_us", 10, _time), ("GB/s", 8, lambda r: sig(r.gbps)),
           ("%roof", 6, lambda r: _f(r.pct_roof, ".1f")),
           ("%sust", 6, lambda r: _f(r.pct_roof_sustained, ".1f")),
           ("graph_us", 9, lambda r: _f(r.graph_us, ".2f")),
           ("max_err", 9, lambda r: _f(r.max_abs_err, ".2e")),
           ("tol", 5, lambda r: _f(r.tol_used, ".2f")),
           ("det", 7, _det), ("b-inv", 5, _binv), ("status", 7, status_label)]


def _row(cells) -> str:
    return "  ".join(f"{c:<{w}}" if i < 2 else f"{c:>{w}}"
                     for i, (c, (_, w, _f2)) in enumerate(zip(cells, COLUMNS)))


def render(records: list[Record]) -> str:
    lines: list[str] = []
    groups: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in records:
        groups[(r.op, r.dtype)].append(r)
    for (op, dtype), recs in groups.items():
        recs = sorted(recs, key=lambda r: (r.bytes, r.shape, r.impl, r.variant))
        timed = next((r for r in recs if r.roof_gbps), None)
        gpu = next((r.provenance.get("gpu_name") for r in recs if r.provenance.get("gpu_name")), None)
        head = f"== {op} · {dtype} · {gpu or recs[0].device}"
        if timed:
            head += f" · roof {timed.roof_gbps:.0f} GB/s ({timed.roof_kind}, {timed.roof_source})"
        if timed and timed.peak_gbps:
            head += f" · datasheet {timed.peak_gbps:.0f} GB/s"
        lines += ["", head + " =="]
        lines.append(_row([c[0] for c in COLUMNS]))
        lines += [_row([fn(r) for _, _, fn in COLUMNS]) for r in recs]
        lines += _pivot(recs)
    lines += _summary(records)
    return "\n".join(lines)


def _pivot(recs: list[Record]) -> list[str]:
    """GB/s (% of roof) with one column per impl: the comparison at a glance."""
    timed = [r for r in recs if r.gbps is not None]
    if not timed:
        return []
    impls = list(dict.fromkeys(r.impl_label for r in recs))
    shapes = list(dict.fromkeys(r.shape_str for r in recs))
    cell = {(r.shape_str, r.impl_label): r for r in recs}
    width = max(14, *(len(i) for i in impls))

    def show(r):
        if r is None:
            return ""
        if r.gbps is None:
            return status_label(r)
        pct = f" ({r.pct_roof:.0f}%)" if r.pct_roof is not None else ""
        flag = "" if r.status == "ok" else f" {status_label(r)}"
        return f"{sig(r.gbps)}{pct}{flag}"

    out = ["", "GB/s (% of roof)".ljust(13) + "  " + "  ".join(i.rjust(width) for i in impls)]
    for s in shapes:
        out.append(s.ljust(13) + "  " + "  ".join(show(cell.get((s, i))).rjust(width) for i in impls))
    return out + _ours_against_peers(recs, shapes)


def best_of(recs: list[Record], role: str) -> Record | None:
    """The fastest passing record of a role (``ours``, ``peer``), negative controls left out."""
    found = [r for r in recs if r.role == role and r.status == "ok" and r.gbps is not None
             and not r.negative_control]
    return max(found, key=lambda r: r.gbps) if found else None


def _ours_against_peers(recs: list[Record], shapes: list[str]) -> list[str]:
    """Per shape, our fastest impl against the fastest peer (the frameworks' declared roles)."""
    rows = []
    for s in shapes:
        here = [r for r in recs if r.shape_str == s]
        ours, peer = best_of(here, "ours"), best_of(here, "peer")
        if ours and peer:
            rows.append(f"{s:<13}  {ours.gbps / peer.gbps:>6.3f}  {ours.impl_label} {sig(ours.gbps)} against "
                        f"{peer.impl_label} {sig(peer.gbps)} GB/s")
    return ["", "ours / best peer", *rows] if rows else []


# A roof and a case timed minutes apart agree to ~1% at 1 GiB (docs/methodology.md). A case further
# above its roof than this says the roof's kernels ran slow in this run (on the H200 a read
# roof once came from torch.sum at 4281 GB/s, where the streaming reads set 4402-4426 on other
# runs, and the sums reached 4441): every % of roof of the run reads high.
ROOF_SLACK = 0.02


def _roof_check(records: list[Record]) -> list[str]:
    """Cases that move more than the L2 holds and read above their roof, though not above the
    memory's peak (those are invalid: harness.measure.integrity): the roof ran low in this run. A case
    inside the L2 can read above the roof by writing into the cache; it says nothing of the roof."""
    above = [r for r in records if r.pct_roof is not None and r.pct_roof > 100 * (1 + ROOF_SLACK)
             and r.bytes > (cache_bytes(r.provenance or {}) or 0)]
    if not above:
        return []
    top = max(above, key=lambda r: r.pct_roof)
    return [f"roof check: {len(above)} case(s) more than {ROOF_SLACK:.0%} above their roof, up to "
            f"{top.pct_roof:.1f}% ({top.case_label}: {top.gbps:.0f} GB/s against {top.roof_gbps:.0f}, "
            f"{top.roof_source}). The roof's kernels ran slower than these cases, so this run's % of "
            f"roof reads high; measure the roof again (roof.cache=false)."]


def _summary(records: list[Record]) -> list[str]:
    counts: dict[str, int] = defaultdict(int)
    for r in records:
        counts[status_label(r)] += 1
    lines = ["", "cases: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())), *legend(records)]
    lines += _roof_check(records)
    slow_clocks = [r for r in records if r.clock_note]
    if slow_clocks:
        lines.append(f"clocks: {len(slow_clocks)} case(s) timed far below the GPU's normal clocks, "
                     f"e.g. {slow_clocks[0].case_label}: {slow_clocks[0].clock_note}")
    problems = [r for r in records if r.status not in ("ok", "skipped")
                and not (r.negative_control and r.status == "fail")]
    for r in problems[:20]:
        lines.append(f"  {status_label(r)} {r.case_label}: {r.reason[:300]}")
    if len(problems) > 20:
        lines.append(f"  ... and {len(problems) - 20} more (see results.jsonl)")
    skipped: dict[tuple[str, str], str] = {}
    for r in records:
        if r.status == "skipped":
            skipped.setdefault((r.impl_label, r.reason), r.op)
    for (impl, reason), _op in sorted(skipped.items()):
        lines.append(f"  skipped {impl}: {reason}")
    if cpu_run(records):
        lines.append(CPU_RUN)
    return lines


def cpu_run(records: list[Record]) -> bool:
    return bool(records) and all(r.device == "cpu" for r in records)


def legend(records: list[Record]) -> list[str]:
    """What the times' marks (``marks``) and their kinds mean, for those these records show."""
    lines = []
    if any(r.timer == "wall_interpreter" for r in records):
        lines.append("* interpreter wall-clock time (GPU kernels run by an interpreter on the CPU): correctness only, "
                     "no bandwidth claimed")
    if not cpu_run(records) and any(r.timer == "wall" for r in records):   # beside GPU records (a report of several runs)
        lines.append("CPU wall-clock times: not GPU measurements")
    if any(in_cache(r) for r in records):
        lines.append("c: the case fits in the CPU's cache, which nothing flushes between launches: "
                     "its GB/s are the cache's, and its % of roof says nothing of the roof")
    if any(noisy(r) for r in records):
        lines.append(f"~: noisy, the samples' p10-p90 spread is over {NOISY_SPREAD:.0%} of the median "
                     f"(on a CPU, other processes competing for the cores); compare such times with care")
    return lines


# The last line of a CPU run: what it showed, and where the rest is measured.
CPU_RUN = ("A CPU run checks correctness (results against float64, the launcher's contract, determinism, batch "
           "invariance); speed needs a GPU: the times above are this CPU's wall clock, no kernel's speed.")
