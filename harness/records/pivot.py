"""One op and dtype's records as one table: an impl per row, a shape per column, the shapes
smallest first. report.html draws it in HTML, the results page (harness.records.results) in
Markdown; both name a case by its rate, "GB/s (% of roof)", and by its status where the
case is not a plain passing result.
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.records.record import Record, by_size, impl_label
from harness.records.sinks import console


def label(r: Record) -> str:
    """The impl as tables and plots name it, its series and variant: ``impl[value]/variant``."""
    return impl_label(r.series, r.variant)


def size(r: Record) -> tuple:
    """A case's place by the size of its shape (harness.records.record.by_size)."""
    return by_size(r.shape)


@dataclass
class Grid:
    impls: list[str]                          # the rows, by name
    shapes: list[str]                         # the columns, smallest first
    cells: dict[tuple[str, str], Record]      # (impl, shape) -> its record

    def get(self, impl: str, shape: str) -> Record | None:
        return self.cells.get((impl, shape))


def grid(recs: list[Record]) -> Grid:
    """The table of one op and dtype's records (one record per case: harness.records.record.latest)."""
    shapes = list(dict.fromkeys(r.shape_str for r in sorted(recs, key=size)))
    return Grid(sorted({label(r) for r in recs}), shapes, {(label(r), r.shape_str): r for r in recs})


def pct(v: float) -> str:
    """A % of roof: whole numbers from 10 up, two significant digits below (0.017, 3.4)."""
    return f"{v:.0f}" if v >= 10 else f"{v:.2g}"


def rate(r: Record) -> str:
    """``4291 (100%)``: GB/s and % of roof; "" where the case claims no bandwidth."""
    if r.gbps is None:
        return ""
    return console.sig(r.gbps) + (f" ({pct(r.pct_roof)}%)" if r.pct_roof is not None else "")


def flag(r: Record) -> str:
    """The status a cell shows beside (or instead of) its rate: "" for a passing case that is
    not a negative control; FAIL, INVALID, skipped, xfail (a control failing as it should) ..."""
    return "" if r.status == "ok" and not r.negative_control else console.status_label(r)
