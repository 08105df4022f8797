"""The published results: one page and the data behind it per GPU model, kept up to date.

    harness-results results.jsonl [more.jsonl ...] [--dir docs/results]
    harness-results summary results.jsonl [...]   # ours against the best peer (harness.records.summary)

Reads harness records, one JSON object per line (other lines, such as harness.measure.nvbench's
rows, are skipped and counted), and groups them by the GPU their provenance names. For
each GPU it merges them into ``<dir>/<slug>.jsonl`` (``h200`` for "NVIDIA H200"): the
latest record of each case wins (harness.records.record.latest), so a case measured again
replaces its record, every other case stays, and no file is added per run; a case that did
not run this time (skipped, or cut by an interrupt) keeps its measured record. The JSONL is
written back in a stable order (op, dtype, shape by size, impl, variant) and
``<dir>/<slug>.md`` is generated from it: the roof, the datasheet peak and the provenance
at the top, then per op and dtype a table with an impl per row and a shape per column,
each cell the case's median time, GB/s and % of roof, and its status where it did not pass.

``devtools/first-run`` lines (``"kind": "first_run"``: how long ``harness op=OP impl=all``
took cold and warm) are kept beside the cases, the latest per (GPU, op, phase), and the page
shows them in a table of their own, the ops summed.

Each page opens with where things stand (harness.records.standing). Without files, every page is
made again from its JSONL as it is; ``--readme README.md`` then rewrites the README's block
of the same table, a column group per GPU page.

A CPU's records (eager on a CPU, a framework's interpreter) are left out: they claim no
bandwidth to put beside a GPU's. Exit 2 for a missing or unreadable file, or when the
files hold no GPU record.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

from harness.records import pivot, standing
from harness.records.reader import BadInput, first_runs, gpu_model, latest_first_runs, on_cpu, read
from harness.records.record import Record, latest, measured_something
from harness.records.sinks import console, jsonl

def _measured_by(r: dict) -> str:
    """A first run's date and the files it ran (the tree of its records' provenance, else the commit)."""
    source = (r.get("tree") and f"tree {r['tree'][:12]}") or r.get("commit") or ""
    return " ".join(x for x in ((r.get("when") or "")[:10], source) if x)


def first_run_table(rows: list[dict]) -> list[str]:
    """Markdown lines: per op, the cases, the cold and warm seconds, then the ops summed
    (``op=all`` measured an op or a few per GPU call)."""
    cells = {(r["op"], r["phase"]): r for r in latest_first_runs(rows)}
    lines = ["| op | cases | cold s | warm s | MLflow | measured |", "|:--|--:|--:|--:|:--|:--|"]
    total = {"cold": 0.0, "warm": 0.0}
    cut_in = {"cold": False, "warm": False}   # a summed phase with a cut part is a lower bound too
    untracked = False
    for op in sorted({op for op, _ in cells}):
        shown = []
        for phase in ("cold", "warm"):
            r = cells.get((op, phase))
            cell = "" if r is None else f"{r['seconds']:.0f}{'+' if r.get('cut') else ''}"
            if r is not None and r.get("not_run"):   # a cut run: how far it got
                cell += f" ({r['cases'] - r['not_run']} of {r['cases']} cases)"
            shown.append(cell)
            total[phase] += r["seconds"] if r else 0.0
            cut_in[phase] |= bool(r and r.get("cut"))
        first = cells.get((op, "cold")) or cells[(op, "warm")]
        both = [(phase, cells[(op, phase)]) for phase in ("cold", "warm") if (op, phase) in cells]
        sources = {(r.get("tree") or r.get("commit")) for _, r in both}
        measured = _measured_by(first) if len(sources) == 1 else \
            ", ".join(f"{phase} {_measured_by(r)}" for phase, r in both)   # two runs of other code: each named
        tracking = "/".join(sorted({r.get("tracking", "off") for _, r in both}))
        untracked |= "off" in tracking
        lines.append(f"| {op} | {first.get('cases', '')} | {shown[0]} | {shown[1]} | {tracking} | {measured} |")
    ops = {op for op, _ in cells}
    if len(ops) > 1:   # named by what it sums: op=all is the catalogue, and these may be fewer
        summed = []
        for phase in ("cold", "warm"):   # a phase no op measured sums to nothing, not 0; a phase some missed
            measured = sum(p == phase for _, p in cells)   # sums only those: a lower bound, said so
            summed.append("" if not measured else f"{total[phase]:.0f}{'+' if cut_in[phase] else ''}"
                          + (f" ({measured} of {len(ops)} ops)" if measured < len(ops) else ""))
        lines.append(f"| these {len(ops)} summed | | {summed[0]} | {summed[1]} | | |")
    cut = cut_in["cold"] or cut_in["warm"]
    if untracked:
        lines += ["", "MLflow `off`: the run logged to no MLflow store (`tracking=none`: MLflow was not installed "
                  "where it ran); the default, a local sqlite store, adds its logging to each case (docs/mlflow.md)."]
    if cut:
        lines += ["", "`+`: cut by its time limit (a lower bound)."]
    return lines


def slug(gpu: str) -> str:
    """The files' name for a GPU model: "NVIDIA H200" -> ``h200``, "NVIDIA H100 80GB HBM3" ->
    ``h100-80gb-hbm3``."""
    name = re.sub(r"^nvidia\s+", "", gpu.strip().lower())
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-")


def order(r: Record) -> tuple:
    """The JSONL's order: op, dtype, shape by size, impl, variant (and the series, which
    tells an impl at a series setting's other value from the impl at its default)."""
    return (r.op, r.dtype, *pivot.size(r), r.impl, r.variant, pivot.label(r))


# --- the page --------------------------------------------------------------------------

def _cell(r: Record | None) -> str:
    """``125 us · 4291 (100%)``; a status beside it where the case did not pass; the status
    alone where nothing was timed."""
    if r is None:
        return ""
    flag = pivot.flag(r)
    if r.median_us is None:
        return flag or console.status_label(r)
    parts = [f"{console.sig(r.median_us)} us"] + ([pivot.rate(r)] if r.gbps is not None else [])
    return " · ".join(parts) + (f" {flag}" if flag else "")


def _values(counts: Counter, most: int = 4) -> str:
    """``a`` for one value; ``a (12), b (3)`` by count for several, the rest counted."""
    if len(counts) == 1:
        return str(next(iter(counts)))
    shown = ", ".join(f"{v} ({n})" for v, n in counts.most_common(most))
    return shown + (f" and {len(counts) - most} more" if len(counts) > most else "")


def _kernels(source: str, kind: str) -> list[str]:
    """The kernels that set a roof of this kind, from a record's roof_source ("measured
    cuda_events, copy by copy_" -> ["copy_"])."""
    return [part.split(" by ", 1)[1] for part in source.split(", ") if part.startswith(f"{kind} by ")]


def _roof(records: list[Record]) -> str:
    """The copy roof (or the commonest kind where no case was a copy) the page's cases were
    measured against: its median over their runs, its range, and the kernels that set it."""
    roofed = [r for r in records if r.roof_gbps]
    if not roofed:
        return "none measured"
    kinds = Counter(r.roof_kind for r in roofed)
    kind = "copy" if "copy" in kinds else kinds.most_common(1)[0][0]
    runs = list({r.invocation_id: r for r in roofed if r.roof_kind == kind}.values())   # one roof per run
    gbps = [r.roof_gbps for r in runs]
    text = f"{kind} {statistics.median(gbps):.0f} GB/s"
    if len(runs) > 1:
        text += f" (the median of {len(runs)} runs, from {min(gbps):.0f} to {max(gbps):.0f})"
    kernels = Counter(k for r in runs for k in _kernels(r.roof_source, kind))
    if kernels:
        text += ", set by " + ", ".join(f"{k} ({n} run{'s' if n > 1 else ''})" for k, n in kernels.most_common())
    return text + "; each op's roof follows its mix of reads and writes (each table names its own)"


def _heading_roof(recs: list[Record]) -> str:
    roofed = [r for r in recs if r.roof_gbps]
    if not roofed:
        return "no roof measured"
    kind = Counter(r.roof_kind for r in roofed).most_common(1)[0][0]
    return f"roof {statistics.median(r.roof_gbps for r in roofed if r.roof_kind == kind):.0f} GB/s ({kind})"


def _provenance(gpu: str, records: list[Record]) -> list[str]:
    prov = [r.provenance or {} for r in records]
    uuids = {p.get("gpu_uuid") for p in prov if p.get("gpu_uuid")}
    versions = defaultdict(Counter)
    for p in prov:
        for name, version in (p.get("versions") or {}).items():
            versions[name][version] += 1
    commits = Counter((p.get("git_sha") or "unknown")[:12] + (" (dirty)" if p.get("git_dirty") else "")
                      for p in prov)
    peak = next((r.peak_gbps for r in records if r.peak_gbps), None)
    days = sorted(r.timestamp[:10] for r in records if r.timestamp)
    runs = len({r.invocation_id for r in records})
    return [
        f"- **Roof**: {_roof(records)}.",
        f"- **Datasheet peak**: {f'{peak:.0f} GB/s' if peak else 'not known for this GPU'}.",
        f"- **GPU**: {gpu}" + (f", {len(uuids)} of them (by gpu_uuid)" if len(uuids) > 1 else "")
        + f"; driver {_values(Counter(p.get('driver') or 'unknown' for p in prov))}"
        + f"; CUDA {_values(Counter(p.get('torch_cuda') or 'unknown' for p in prov))}.",
        "- **Software**: " + ", ".join(f"{name} {_values(v)}" for name, v in sorted(versions.items())) + ".",
        f"- **Commits**: {_values(commits)}.",
        f"- **Measured**: {days[0]} to {days[-1]}, {len(records)} cases in {runs} runs." if days else
        f"- **Measured**: {len(records)} cases.",
    ]


LEGEND = ("Each cell: median time · GB/s (% of the roof measured on the same GPU in the same run), then "
          "the status where the case did not pass: FAIL (its correctness checks failed), INVALID (it broke "
          "the launcher's contract or ran faster than memory allows: no bandwidth claimed), xfail (a negative "
          "control failing as it should), skipped, ERROR, OOM, CRASH, TIMEOUT (the JSONL's reason says why). "
          "Role: ours (this project's kernels) or peer (what they are compared against). "
          "How the numbers are measured: [docs/methodology.md](../methodology.md).")


def page(gpu: str, records: list[Record], data_name: str, first_runs: list[dict] = ()) -> str:
    """The Markdown page of one GPU's records (the latest of each case), and its first runs."""
    lines = [f"# {gpu}", "",
             f"Generated by `harness-results` from [{data_name}]({data_name}), the latest record of each case "
             "measured on this GPU model. To add a run, `harness-results <run folder>/results.jsonl`: the cases it "
             "measured replace their records here, the others stay.", ""]
    if records:
        lines += ["## Where things stand", "", *standing.page_table(records), ""]
    if first_runs:
        lines += ["## First runs", "",
                  "`harness op=OP impl=all` (default sweep), timed by `devtools/first-run`: cold with a fresh "
                  "`HARNESS_CACHE` (the roof measured, every kernel built), warm "
                  "with the same cache again.", "", *first_run_table(first_runs), ""]
    if records:
        lines += ["## Measured on", "", *_provenance(gpu, records), ""]
    lines += [LEGEND]
    groups: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in records:
        groups[(r.op, r.dtype)].append(r)
    for (op, dtype), recs in sorted(groups.items()):
        table = pivot.grid(recs)
        roles = {pivot.label(r): r.role for r in recs}
        lines += ["", f"## {op} · {dtype} · {_heading_roof(recs)}", "",
                  "| impl | role | " + " | ".join(table.shapes) + " |",
                  "|:--|:--|" + "--:|" * len(table.shapes)]
        lines += [f"| {impl} | {roles[impl]} | " + " | ".join(_cell(table.get(impl, s)) for s in table.shapes) + " |"
                  for impl in table.impls]
    return "\n".join(lines) + "\n"


# --- the files -------------------------------------------------------------------------

def _write(path: Path, text: str) -> None:
    """Whole or not at all: a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def publish(gpu: str, new: list[Record], folder: Path, new_first_runs: list[dict] = ()) -> str:
    """Merge one GPU's new records (and first-run lines) into its JSONL and regenerate its
    page; what was done, in words."""
    data, md = folder / f"{slug(gpu)}.jsonl", folder / f"{slug(gpu)}.md"
    old, old_rows = read(data, cut_ok=False) if data.exists() else ([], [])
    first = latest_first_runs(first_runs(old_rows) + list(new_first_runs))
    # A record that measured nothing (skipped, or cut by an interrupt) does not replace one
    # that did: a run stopped early or without a framework loses no published result.
    measured = {r.case_key for r in old + new if measured_something(r)}
    kept_back = [r for r in new if not measured_something(r) and r.case_key in measured]
    new = [r for r in new if measured_something(r) or r.case_key not in measured]
    old = [r for r in old if measured_something(r) or r.case_key not in measured]
    merged = sorted(latest(old + new), key=order)
    old_cases = {r.case_key for r in old}
    kept = {r.record_id for r in old}
    replaced = sum(1 for r in merged if r.case_key in old_cases and r.record_id not in kept)
    added = sum(1 for r in merged if r.case_key not in old_cases)
    folder.mkdir(parents=True, exist_ok=True)
    _write(data, "".join(json.dumps(r.as_dict(), default=str) + "\n" for r in merged)
           + "".join(json.dumps(row, default=str) + "\n" for row in first))
    _write(md, page(gpu, merged, data.name, first))
    return (f"{gpu}: {data} holds {len(merged)} cases ({replaced} measured again, {added} new)"
            + (f" and {len(first)} first runs" if first else "") + f"; {md} regenerated"
            + (f"; {len(kept_back)} cases that did not run this time keep their measured records"
               if kept_back else ""))


def regenerate(folder: Path) -> list[str]:
    """Each GPU's page made again from its JSONL as it is (the JSONL is not rewritten); what
    was done, in words."""
    done = []
    for data in sorted(folder.glob("*.jsonl")):
        records, rows = read(data, cut_ok=False)
        gpus = {gpu_model(r) for r in records} - {None} or {row["gpu"] for row in first_runs(rows)}
        if len(gpus) != 1:
            raise BadInput(f"{data}: records of {len(gpus)} GPU models ({', '.join(sorted(gpus))}); a page holds one")
        md = data.with_suffix(".md")
        _write(md, page(gpus.pop(), records, data.name, latest_first_runs(first_runs(rows))))
        done.append(f"{md} regenerated from {data.name}")
    if not done:
        raise BadInput(f"{folder} holds no <gpu>.jsonl to make a page from; name results files to publish")
    return done


SUMMARY = "summary"   # the subcommand: ours against the best peer, as Markdown (harness.records.summary)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [SUMMARY]:
        from harness.records import summary
        return summary.main(argv[1:])
    ap = argparse.ArgumentParser(prog="harness-results", description=__doc__.split("\n\n")[0],
                                 epilog=f"harness-results {SUMMARY} FILE [...] --help: ours against the best peer, "
                                        "as Markdown tables")
    ap.add_argument("files", nargs="*", type=Path,
                    help="results.jsonl files (the latest record of a case wins); none: every page in --dir is "
                         "made again from its JSONL")
    ap.add_argument("--dir", type=Path, default=Path("docs/results"),
                    help="the folder of the pages and their JSONL, one of each per GPU (default: docs/results)")
    ap.add_argument("--readme", type=Path, metavar="README.md",
                    help="then rewrite the block 'where things stand' of this file from every page in --dir")
    args = ap.parse_args(argv)
    try:
        if not args.files:
            for line in regenerate(args.dir):
                print(f"harness-results: {line}")
        records, others, first, unplaced_runs = [], 0, defaultdict(list), []
        for path in args.files:
            found, skipped = read(path)
            rows = first_runs(skipped, unplaced_runs)
            for row in rows:
                first[row["gpu"]].append(row)
            records += found
            others += len(skipped) - len(rows)
        others -= len(unplaced_runs)
        if unplaced_runs:
            print(f"harness-results: left out {len(unplaced_runs)} first-run lines without an op, a phase (cold or "
                  f"warm), seconds or a GPU (a run cut before its first record names no GPU), e.g. "
                  f"{json.dumps(unplaced_runs[0])[:160]}")
        by_gpu: dict[str, list[Record]] = defaultdict(list)
        cpu, unplaced = [], []
        for r in records:
            (cpu if on_cpu(r) else unplaced if gpu_model(r) is None else by_gpu[gpu_model(r)]).append(r)
        if others:
            print(f"harness-results: skipped {others} lines that are not case records (e.g. harness.measure.nvbench rows)")
        if cpu:
            print(f"harness-results: left out {len(cpu)} records measured on a CPU ({cpu[0].case_label}, "
                  f"timer {cpu[0].timer or 'none'}): a results page holds a GPU's measurements; a CPU's times "
                  "claim no bandwidth", file=sys.stderr)
        if unplaced:
            print(f"harness-results: left out {len(unplaced)} records that name no GPU (a run interrupted "
                  f"leaves its unfinished cases without one), e.g. {unplaced[0].case_label}: {unplaced[0].reason}")
        if not by_gpu and not first and args.files:
            what = "records" if records else "case records"
            raise BadInput(f"no GPU measurements to publish: the files hold {len(records)} {what}"
                           + (f", {len(cpu)} of them from a CPU; run the harness on a GPU" if cpu else ""))
        for gpu in sorted(set(by_gpu) | set(first)):
            print(f"harness-results: {publish(gpu, by_gpu.get(gpu, []), args.dir, first.get(gpu, []))}")
        if args.readme:
            changed = standing.rewrite_readme(args.readme, args.dir)
            print(f"harness-results: {args.readme}: where things stand "
                  f"{'regenerated' if changed else 'already as the pages say'}")
    except (BadInput, jsonl.BadResults) as e:
        print(f"harness-results: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
