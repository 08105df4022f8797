"""A run's report: per op and dtype, two plots and the comparison table, in one HTML file.

    plots/<op>-<dtype>-gbps.png   GB/s against compulsory bytes moved (log x): a line per
                                  impl and variant, the measured roof (and the datasheet
                                  peak, where there is one) as lines
    plots/<op>-<dtype>-roof.png   % of roof, impl x shape, as a heatmap; a case with no
                                  rate names its status (FAIL, skipped, ...)
    report.html                   self-contained (the plots inline): what ran where, the
                                  GB/s (% of roof) table per op and dtype, both plots, and
                                  the console table

The harness writes them into each run's output folder and onto the run's MLflow run;
``harness-report results.jsonl [more.jsonl ...] --out DIR`` rebuilds them from records.
Only ok cases that are not negative controls are plotted. The plots need matplotlib; without
it the report says so and keeps its tables.
"""
from __future__ import annotations

import argparse
import base64
import html
import io
import math
import sys
from collections import defaultdict
from pathlib import Path

from harness.records import pivot
from harness.records.pivot import label, pct
from harness.records.reader import gpu_model
from harness.records.record import Record, latest
from harness.records.sinks import console

REPORT = "report.html"
PLOTS = "plots"


def groups(records: list[Record]) -> dict[tuple[str, str], list[Record]]:
    """Records by (op, dtype), in the order they came; the latest record of a case wins."""
    found: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in latest(records):
        found[(r.op, r.dtype)].append(r)
    return found


def plotted(r: Record) -> bool:
    return r.status == "ok" and r.gbps is not None and not r.negative_control


def _bytes_label(n: float, _pos=None) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v >= 10 or v == int(v) else f"{v:.1f} {unit}"
    return f"{n:.0f} B"


def _title(op: str, dtype: str, recs: list[Record]) -> str:
    where = next((gpu_model(r) for r in recs if gpu_model(r)), None)
    return f"{op} · {dtype} · {where or recs[0].device}"


def bandwidth_plot(op: str, dtype: str, recs: list[Record]):
    """GB/s against bytes moved, one line per impl; None where nothing was timed."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator
    timed = [r for r in recs if plotted(r)]
    if not timed:
        return None
    fig = Figure(figsize=(9, 5), layout="constrained")
    ax = fig.add_subplot()
    lines: dict[str, list[Record]] = defaultdict(list)
    for r in timed:
        lines[label(r)].append(r)
    for i, (name, rs) in enumerate(sorted(lines.items())):
        # Shapes of one size (a row op's 32768x4096 and 8192x16384) are dots above one
        # another; the line joins each size's median.
        by_size: dict[int, list[float]] = defaultdict(list)
        for r in rs:
            by_size[r.bytes].append(r.gbps)
        xs = sorted(by_size)
        color, style = series_style(i)
        ax.plot(xs, [_median(by_size[x]) for x in xs], label=name, color=color, linestyle=style)
        ax.plot([r.bytes for r in rs], [r.gbps for r in rs], linestyle="none", marker="o", markersize=4,
                color=color)
    roofs: dict[int, list[float]] = defaultdict(list)
    for r in recs:
        if r.roof_gbps:
            roofs[r.bytes].append(r.roof_gbps)
    if roofs:
        xs = sorted(roofs)
        kind = next((r.roof_kind for r in recs if r.roof_kind), "")
        ax.plot(xs, [_median(roofs[x]) for x in xs], color="black", linestyle="--",
                linewidth=1.2, label=f"roof ({kind})" if kind else "roof")
    peak = next((r.peak_gbps for r in recs if r.peak_gbps), None)
    if peak:
        ax.axhline(peak, color="grey", linestyle=":", linewidth=1, label="datasheet peak")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=4))
    ax.xaxis.set_major_formatter(FuncFormatter(_bytes_label))
    ax.set_xlabel("compulsory bytes moved per launch (log scale)")
    ax.set_ylabel("GB/s")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="major", alpha=0.3)
    ax.set_title(_title(op, dtype, recs))
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small", frameon=False)
    return fig


# matplotlib's ten colours, then again dashed, dotted, dash-dotted: an op's impls and variants
# number up to 20 (the colours alone made triton and cuda/naive the same blue).
LINE_STYLES = ("-", "--", ":", "-.")


def series_style(i: int) -> tuple[str, str]:
    """The colour and line style of a plot's i-th series, none repeated within 40."""
    return f"C{i % 10}", LINE_STYLES[i // 10 % len(LINE_STYLES)]


def roof_heatmap(op: str, dtype: str, recs: list[Record]):
    """% of roof, impl x shape; None where no case has one."""
    from matplotlib.figure import Figure
    if not any(r.pct_roof is not None for r in recs):
        return None
    table = pivot.grid(recs)
    shapes, impls = table.shapes, table.impls
    values = [[(r.pct_roof if (r := table.get(i, s)) is not None and plotted(r) and r.pct_roof is not None
                else math.nan) for s in shapes] for i in impls]
    top = max([v for row in values for v in row if not math.isnan(v)], default=100.0)
    fig = Figure(figsize=(max(6.0, 1.1 * len(shapes) + 3), max(2.5, 0.45 * len(impls) + 1.5)), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(values, cmap="viridis", vmin=0, vmax=max(100.0, top), aspect="auto")
    for y, i in enumerate(impls):
        for x, s in enumerate(shapes):
            r = table.get(i, s)
            if r is None:
                continue
            v = values[y][x]
            text = pct(v) if not math.isnan(v) else console.status_label(r)
            ax.text(x, y, text, ha="center", va="center", fontsize="small",
                    color="white" if not math.isnan(v) and v < 0.6 * max(100.0, top) else "black")
    ax.set_xticks(range(len(shapes)), shapes, rotation=30, ha="right")
    ax.set_yticks(range(len(impls)), impls)
    ax.set_xlabel("shape (smallest first)")
    ax.set_title(f"% of roof · {_title(op, dtype, recs)}")
    fig.colorbar(image, ax=ax, label="% of roof")
    return fig


def _median(values: list[float]) -> float:
    v = sorted(values)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return buf.getvalue()


# Statuses that say something went wrong, red; the others (ok, skipped, xfail: a control
# failing as it must) plain grey.
BAD = ("FAIL", "INVALID", "ERROR", "CRASH", "OOM", "TIMEOUT", "XPASS")


def _status(label: str) -> str:
    return f'<span class="{"bad" if label in BAD else "quiet"}">{html.escape(label)}</span>'


def _cell(r: Record | None) -> str:
    """A case's rate with its time's marks (harness.records.sinks.console.marks: ``c`` in the CPU's
    cache, ``~`` noisy), and its status where it is not a plain pass; the status alone where
    it claims no rate."""
    if r is None:
        return ""
    if r.gbps is None:
        return _status(console.status_label(r))
    flag, marks = pivot.flag(r), console.marks(r)
    return (html.escape(pivot.rate(r)) + (f' <span class="mark">{html.escape(marks)}</span>' if marks else "")
            + (f" {_status(flag)}" if flag else ""))


def table(recs: list[Record]) -> str:
    """GB/s (% of roof): a row per impl, a column per shape (harness.records.pivot), in HTML."""
    grid = pivot.grid(recs)
    head = "".join(f"<th>{html.escape(s)}</th>" for s in grid.shapes)
    rows = "".join(f"<tr><th>{html.escape(i)}</th>" + "".join(f"<td>{_cell(grid.get(i, s))}</td>" for s in grid.shapes)
                   + "</tr>" for i in grid.impls)
    return f'<table><thead><tr><th>GB/s (% of roof)</th>{head}</tr></thead><tbody>{rows}</tbody></table>'


def _provenance(records: list[Record]) -> str:
    p = next((r.provenance for r in records if r.provenance), {}) or {}
    versions = p.get("versions") or {}
    facts = [("device", records[0].device if records else ""), ("GPU", p.get("gpu_name")),
             ("driver", p.get("driver")), ("CUDA", p.get("torch_cuda")),
             ("software", ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))),
             ("host", p.get("host")),
             ("commit", (p.get("git_sha") or "")[:12] + (" (dirty)" if p.get("git_dirty") else "")),
             ("from", min((r.timestamp for r in records), default="")),
             ("to", max((r.timestamp for r in records), default=""))]
    return "<dl>" + "".join(f"<dt>{k}</dt><dd>{html.escape(str(v))}</dd>" for k, v in facts if v) + "</dl>"


STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}h1{font-size:1.4em}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:right}
thead th{background:#f3f3f3}tbody th{text-align:left}.bad{color:#b00;font-weight:600}.quiet{color:#666}
.mark{color:#666}
dl{display:grid;grid-template-columns:max-content auto;gap:.1em 1em}dt{font-weight:600}
pre{background:#f7f7f7;padding:1em;overflow-x:auto;font-size:12px}img{max-width:100%}"""


def write(records: list[Record], folder: Path, title: str = "kernel-harness run") -> list[Path]:
    """Write report.html and plots/ into ``folder``; the paths written (report first)."""
    folder = Path(folder)
    try:
        import matplotlib  # noqa: F401
        plots_note = ""
    except ImportError:
        plots_note = "<p>No plots: matplotlib is not installed (<code>pip install matplotlib</code>).</p>"
    written: list[Path] = []
    sections = []
    by_group = groups(records)
    records = [r for recs in by_group.values() for r in recs]   # the latest of each case, everywhere below
    for (op, dtype), recs in by_group.items():
        images = []
        if not plots_note:
            for kind, make in (("gbps", bandwidth_plot), ("roof", roof_heatmap)):
                fig = make(op, dtype, recs)
                if fig is None:
                    continue
                png = _png(fig)
                path = folder / PLOTS / f"{op}-{dtype}-{kind}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(png)
                written.append(path)
                images.append(f'<img alt="{html.escape(path.name)}" src="data:image/png;base64,'
                              f'{base64.b64encode(png).decode()}">')
        sections.append(f"<h2>{html.escape(_title(op, dtype, recs))}</h2>{table(recs)}{''.join(images)}")
    counts = defaultdict(int)
    for r in records:
        counts[console.status_label(r)] += 1
    body = (f"<h1>{html.escape(title)}</h1>{_provenance(records)}"
            f"<p>cases: {html.escape(', '.join(f'{n} {s}' for s, n in sorted(counts.items())))}</p>"
            + "".join(f"<p>{html.escape(line)}</p>" for line in console.legend(records)) +
            f"{plots_note}{''.join(sections)}<h2>Every case</h2><pre>{html.escape(console.render(records))}</pre>")
    report = folder / REPORT
    folder.mkdir(parents=True, exist_ok=True)
    report.write_text(f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
                      f"<style>{STYLE}</style></head><body>{body}</body></html>\n")
    return [report, *written]


def main(argv: list[str] | None = None) -> int:
    from harness.records import reader   # the one rule for which lines are records, and for damaged ones
    from harness.records.sinks.jsonl import BadResults
    ap = argparse.ArgumentParser(prog="harness-report", description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path, help="results.jsonl files (the latest record of a case wins)")
    ap.add_argument("--out", type=Path, default=Path("."), help="the folder for report.html and plots/ (default: .)")
    ap.add_argument("--title", default=None, help="the report's title (default: the files' names)")
    args = ap.parse_args(argv)
    records = []
    for path in args.files:
        if not path.is_file():
            print(f"harness-report: {path}: no such file (give results.jsonl files)", file=sys.stderr)
            return 2
        try:
            records += reader.read(path)[0]   # other rows (devtools/first-run's timings) are no cases
        except BadResults as e:
            print(f"harness-report: {e}", file=sys.stderr)
            return 2
    if not records:
        print("harness-report: the files hold no records", file=sys.stderr)
        return 2
    paths = write(records, args.out, args.title or ", ".join(str(p) for p in args.files))
    print(f"harness-report: {paths[0]} ({len(paths) - 1} plots)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
