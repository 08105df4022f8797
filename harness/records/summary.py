"""Ours against the best peer, as Markdown: for each op, dtype and shape (shapes by size),
the fastest passing impl of ours and the fastest passing peer (the role each record
carries: harness.registry.Framework.role), each with its GB/s and % of roof, and the ratio
of the two speeds; with --matrix, only the ratios, a row per op and shape and a column per
dtype. A ratio is marked where the two medians' 95% intervals overlap, where the two
records come from different GPUs, and where one rests on a short record timed without the
host lead measured; a note under the table says what each mark means. Reads only what the
harness recorded; where a case was measured more than once, the latest record wins;
negative controls and failed cases are not compared.

    harness-results summary docs/results/h200.jsonl [--min-bytes 268435456]
    harness-results summary docs/results/h200.jsonl --max-bytes 268435456 --matrix   # ratios only
    harness-results summary docs/results/h200.jsonl --matrix --same-gpu   # each case's last comparison on one GPU
    harness-results summary docs/results/h200.jsonl --frameworks   # each framework's best % of roof per op
    harness-results summary docs/results/h200.jsonl --min-bytes 268435456 --by-op   # a row per op: the ranges
    harness-results summary docs/results/h200.jsonl --ours triton   # ours is Triton alone (any table)

Where the table would be empty it says why instead (e.g. every record was measured on a
CPU, or no peer was measured beside ours) and exits 1; a file that is missing or not JSON
lines is one line naming it, exit 2.
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path

from harness.records.reader import gpu_card, on_cpu, read
from harness.records.record import Record, by_size, impl_label, measured_something
from harness.records.sinks import jsonl

PROG = "harness-results summary"

# A record without spin_us was timed with the old fixed 0.1 ms lead over the host: a launch
# costing the host more (torch.compile's guards, a Python wrapper) could put host time
# inside a short case's time. A ratio that rests on one is marked.
FIXED_LEAD_MARK = "†"
FIXED_LEAD_NOTE = (f"{FIXED_LEAD_MARK}: a record under 100 us timed with the old fixed lead over the host "
                   "(no spin_us): host time may be inside it, most for torch.compile and Liger "
                   "(docs/methodology.md, timing of small shapes)")


def fixed_lead(*records: Record | None) -> bool:
    """Whether a ratio rests on a short record timed with the old fixed lead."""
    return any(r is not None and r.spin_us is None and (r.median_us or 1e9) < 100 for r in records)


# Each record's median comes with a 95% interval over its own run's samples
# (median_lo_us..median_hi_us). Where the two intervals overlap, the runs' samples do not
# tell the two medians apart, whichever way the ratio points.
TIE_MARK = "≈"
TIE_NOTE = (f"{TIE_MARK}: the two medians' 95% intervals overlap: their runs' samples do not tell them apart "
            "(runs apart can differ by more: docs/methodology.md, timing of small shapes)")


def unresolved(ours: Record, peer: Record) -> bool:
    """Whether two records' median intervals overlap (False where either has none)."""
    if any(r.median_lo_us is None or r.median_hi_us is None for r in (ours, peer)):
        return False
    return ours.median_lo_us <= peer.median_hi_us and peer.median_lo_us <= ours.median_hi_us


# H200s differ: RMSNorm bf16 16x4096 in one config ran in 4.58 us on one and 4.77 us on
# another. A ratio of records from two GPUs (gpu_uuid), or from one that names none, says
# less than one from the same GPU: marked.
OTHER_GPU_MARK = "‡"
OTHER_GPU_NOTE = (f"{OTHER_GPU_MARK}: the two records come from different GPUs (gpu_uuid), or one names none: "
                  "small cases differ by a few % between H200s (docs/methodology.md, differences between H200s)")


def other_gpus(ours: Record, peer: Record) -> bool:
    """Whether two records are not known to come from the same GPU."""
    cards = [gpu_card(r) for r in (ours, peer)]
    return None in cards or cards[0] != cards[1]


MARKS = ((FIXED_LEAD_MARK, fixed_lead, FIXED_LEAD_NOTE), (TIE_MARK, unresolved, TIE_NOTE),
         (OTHER_GPU_MARK, other_gpus, OTHER_GPU_NOTE))


def marks(ours: Record, peer: Record) -> str:
    """The marks a ratio of ``ours`` to ``peer`` carries."""
    return "".join(mark for mark, applies, _ in MARKS if applies(ours, peer))


def print_notes(used: str) -> None:
    """The note of every mark that was used."""
    for mark, _, note in MARKS:
        if mark in used:
            print(f"\n{note}")


ANY_GPU = "any GPU"   # load's one key per case where GPUs are not told apart


def load(records: list[Record], min_bytes: int, max_bytes: int | None, same_gpu: bool = False,
         ours_only: frozenset | None = None) -> tuple[dict, Counter]:
    """({(op, dtype, shape): {label: the latest record}}, what was read and left out), negative
    controls left out. With ``same_gpu``, the latest records of one GPU (gpu_uuid) per case:
    the GPU on which ours and a peer were last both measured (a case never compared on one
    GPU is left out). With ``ours_only``, ours are those frameworks' records alone."""
    cases = defaultdict(lambda: defaultdict(dict))   # case -> GPU (ANY_GPU: all alike) -> label -> record
    seen = Counter()
    for r in records:
        seen["records"] += 1
        seen["on a CPU"] += on_cpu(r)
        if r.gbps is None:
            seen["without a rate (not timed, failed before timing, or an interpreter)"] += 1
            continue
        if r.negative_control:
            seen["negative controls"] += 1
            continue
        if r.bytes < min_bytes or (max_bytes is not None and r.bytes >= max_bytes):
            seen["outside --min-bytes/--max-bytes"] += 1
            continue
        if ours_only is not None and r.role == "ours" and r.impl not in ours_only:
            seen["of ours outside --ours"] += 1
            continue
        label = impl_label(r.series, r.variant)
        gpu = gpu_card(r) if same_gpu else ANY_GPU
        if gpu is None:
            seen["naming no GPU (--same-gpu)"] += 1
            continue   # same_gpu: a record naming no GPU cannot be placed on one
        case = cases[(r.op, r.dtype, r.shape_str)][gpu]
        if label not in case or r.timestamp >= case[label].timestamp:
            case[label] = r   # the latest measurement of a case wins, whatever the file order
    if not same_gpu:
        return {key: gpus[ANY_GPU] for key, gpus in cases.items()}, seen
    return {key: impls for key, gpus in cases.items() if (impls := _latest_comparison(gpus))}, seen


def why_empty(cases: dict, seen: Counter, same_gpu: bool) -> str | None:
    """Why no case has a ratio of ours to a peer; None where one has."""
    found = [f for impls in cases.values() if (f := compare(impls))]
    if any(peer for _, _, _, peer in found):
        return None
    n = seen["records"]
    if not n:
        return "the files hold no harness records"
    if seen["on a CPU"] == n:
        return f"all {n} records were measured on a CPU (eager or an interpreter): no bandwidth to compare"
    if not cases:
        if same_gpu:
            return "no case has ours and a peer measured on one GPU (gpu_uuid)"
        left_out = ", ".join(f"{k} {why}" for why, k in seen.items() if why not in ("records", "on a CPU"))
        return f"none of the {n} records can be compared: {left_out}"
    if not found:
        return "no impl of ours passed in any case: nothing to put beside the peers"
    return "no peer measured beside ours: " + ", ".join(sorted({best_k for best_k, *_ in found}))


def _latest_comparison(gpus: dict) -> dict | None:
    """Of a case's records by GPU, those of the GPU whose ours and peer comparison is the
    most recent; None where no GPU has both."""
    compared = [(max(r.timestamp for r in found[1::2]), impls)
                for impls in gpus.values() if (found := compare(impls)) and found[3]]
    return max(compared, key=lambda c: c[0])[1] if compared else None


def compare(impls: dict):
    """(best label of ours, its record, best peer label or None, its record or None) of a case."""
    ours = {k: r for k, r in impls.items() if r.role == "ours" and r.status == "ok"}
    peers = {k: r for k, r in impls.items() if r.role == "peer" and r.status == "ok"}
    if not ours:
        return None
    best_k, best = max(ours.items(), key=lambda kv: kv[1].gbps)
    peer_k, peer = max(peers.items(), key=lambda kv: kv[1].gbps) if peers else (None, None)
    return best_k, best, peer_k, peer


def sustained(r: Record | None) -> str:
    """A record's % of the sustained roof (harness.measure.timing: large cases only), or -."""
    pct = r and r.pct_roof_sustained
    return "-" if pct is None else f"{pct:.1f}"


def shape_size(shape: str) -> tuple:
    """A shape's place by size, from its text: 16x4096 before 16384x8192."""
    return by_size([int(n) for n in shape.split("x")])


def print_cases(cases: dict) -> None:
    print("| op | dtype | shape | best of ours | % of roof | best peer | peer % of roof | ours / peer "
          "| sustained % of roof: ours, peer |")
    print("|---|---|---|---|---|---|---|---|---|")
    used = ""
    for (op, dtype, shape), impls in sorted(cases.items(), key=lambda kv: (kv[0][:2], shape_size(kv[0][2]))):
        if not (found := compare(impls)):
            continue
        best_k, best, peer_k, peer = found
        row = f"| {op} | {dtype} | {shape} | {best_k} {best.gbps:.0f} GB/s | {best.pct_roof:.1f} |"
        if peer:
            mark = marks(best, peer)
            used += mark
            row += f" {peer_k} {peer.gbps:.0f} GB/s | {peer.pct_roof:.1f} | {best.gbps / peer.gbps:.3f}{mark} |"
        else:
            row += " - | - | - |"
        print(row + f" {sustained(best)}, {sustained(peer)} |")
    print_notes(used)


def print_matrix(cases: dict) -> None:
    """One row per op and shape, one column per dtype: best of ours / best peer (the same
    bytes, so the ratio of speeds), bold below 1, - where no peer passed."""
    dtypes = sorted({dtype for _, dtype, _ in cases})
    rows = defaultdict(dict)
    for (op, dtype, shape), impls in cases.items():
        if found := compare(impls):
            _, best, _, peer = found
            rows[(op, shape)][dtype] = (best.gbps / peer.gbps, marks(best, peer)) if peer else None

    def cell(found):
        if found is None:
            return "-"
        ratio, mark = found
        return (f"**{ratio:.3f}**" if ratio < 1 else f"{ratio:.3f}") + mark
    print("| op | shape | " + " | ".join(dtypes) + " |")
    print("|---|---|" + "---|" * len(dtypes))
    for (op, shape), ratio in sorted(rows.items(), key=lambda kv: (kv[0][0], shape_size(kv[0][1]))):
        print(f"| {op} | {shape} | " + " | ".join("" if d not in ratio else cell(ratio[d]) for d in dtypes) + " |")
    print_notes("".join(found[1] for ratio in rows.values() for found in ratio.values() if found))


def _span(values: list[tuple[float, str]], fmt: str) -> str:
    """min-max of (value, mark) pairs, each end with its mark; one value where they are equal."""
    (lo, lo_mark), (hi, hi_mark) = min(values), max(values)
    low, high = f"{lo:{fmt}}{lo_mark}", f"{hi:{fmt}}{hi_mark}"
    return low if low == high else f"{low}-{high}"


def _most_first(names: list[str]) -> str:
    """Distinct names, the most frequent first, each with its count where there are several."""
    counts = Counter(names).most_common()
    return ", ".join(name if len(counts) == 1 else f"{name} {n}" for name, n in counts)


def print_by_op(cases: dict) -> None:
    """A row per op: the cases compared, the range of ours' % of roof and of ours / best peer
    (each end marked as its case's ratio is), and which frameworks of ours and which peers
    were best, the most often first."""
    per_op = defaultdict(list)
    for (op, _, _), impls in cases.items():
        if found := compare(impls):
            per_op[op].append(found)
    print("| op | cases | ours % of roof | ours / best peer | best of ours | best peer |")
    print("|---|---|---|---|---|---|")
    used = ""
    for op, found in sorted(per_op.items()):
        ratios = [(best.gbps / peer.gbps, marks(best, peer)) for _, best, _, peer in found if peer]
        used += "".join(mark for _, mark in ratios)
        pct = _span([(best.pct_roof, "") for _, best, _, _ in found], ".1f")
        ours = _most_first([best_k.split("/")[0] for best_k, *_ in found])
        peers = _most_first([peer_k.split("/")[0] for _, _, peer_k, _ in found if peer_k]) or "-"
        print(f"| {op} | {len(found)} | {pct} | {_span(ratios, '.3f') if ratios else '-'} | {ours} | {peers} |")
    print_notes(used)


def print_frameworks(records: list[Record], shapes: list[str], dtypes=("bfloat16", "float32")) -> None:
    """A row per op, a column per framework (ours, then peers): its best variant that passed,
    % of roof, at the first of ``shapes`` the op was measured at, one value per dtype
    ("-": measured there, nothing passed)."""
    best = defaultdict(dict)   # (op, shape, dtype, framework) -> the latest record per variant
    roles = {}
    for r in records:
        if r.negative_control or on_cpu(r) or not measured_something(r):
            continue   # skipped or cut: says nothing of the framework there
        key = (r.op, r.shape_str, r.dtype, r.impl)
        roles[r.impl] = r.role
        if r.variant not in best[key] or r.timestamp >= best[key][r.variant].timestamp:
            best[key][r.variant] = r
    frameworks = sorted({k[3] for k in best}, key=lambda f: (roles[f] != "ours", f))
    print(f"| op | shape | {' | '.join(frameworks)} |")
    print("|---|---|" + "---|" * len(frameworks))
    for op in sorted({k[0] for k in best}):
        shape = next((s for s in shapes if any(k[:2] == (op, s) for k in best)), None)
        if shape is None:
            continue
        cells = []
        for fw in frameworks:
            values = []
            for dtype in dtypes:
                found = best.get((op, shape, dtype, fw), {}).values()
                passed = [r.pct_roof for r in found if r.status == "ok" and r.pct_roof is not None]
                values.append(f"{max(passed):.1f}" if passed else ("-" if found else ""))
            cells.append(" / ".join(values) if any(values) else "")
        print(f"| {op} | {shape} | {' | '.join(cells)} |")
    print(f"\nEach framework's best variant that passed its checks, % of roof, {' / '.join(dtypes)} "
          "(the latest record of each case); -: measured, none passed.")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--min-bytes", type=int, default=0, help="only cases moving at least this many bytes")
    ap.add_argument("--max-bytes", type=int, default=None, help="only cases moving fewer than this many bytes")
    table = ap.add_mutually_exclusive_group()   # which table: one a run
    table.add_argument("--matrix", action="store_true", help="only the ratios: a row per op and shape, a column per dtype")
    ap.add_argument("--same-gpu", action="store_true",
                    help="per case, the latest records of the GPU on which ours and a peer were last both measured")
    table.add_argument("--frameworks", nargs="?", const="268435456,32768x4096", metavar="SHAPES",
                       help="a row per op, a column per framework: its best passing variant's %% of roof at the "
                            "first of SHAPES (comma-separated) the op has (default 268435456,32768x4096)")
    table.add_argument("--by-op", action="store_true",
                       help="a row per op: its cases, the ranges of ours' %% of roof and of ours / best peer, "
                            "and which frameworks were best")
    ap.add_argument("--ours", metavar="FRAMEWORKS",
                    help="ours is only these frameworks (comma-separated, e.g. triton); peers stay as they are")
    args = ap.parse_args(argv)
    try:
        records = [r for path in args.files for r in read(path)[0]]
    except jsonl.BadResults as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    ours_only = frozenset(args.ours.split(",")) if args.ours else None
    if ours_only is not None:
        if args.frameworks:
            print(f"{PROG}: --ours does not narrow --frameworks (a column per framework already)", file=sys.stderr)
            return 2
        known = {r.impl for r in records if r.role == "ours"}
        if unknown := sorted(ours_only - known):
            print(f"{PROG}: --ours {','.join(unknown)}: no record of ours from that framework in these files "
                  f"(ours there: {', '.join(sorted(known)) or 'none'})", file=sys.stderr)
            return 2
    if args.frameworks:
        print_frameworks(records, args.frameworks.split(","))
        return 0
    cases, seen = load(records, args.min_bytes, args.max_bytes, args.same_gpu, ours_only)
    if why := why_empty(cases, seen, args.same_gpu):
        print(f"{PROG}: no table: {why}", file=sys.stderr)
        return 1
    (print_by_op if args.by_op else print_matrix if args.matrix else print_cases)(cases)
    return 0
