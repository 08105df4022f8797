"""Two results files compared case by case, with the nightly job's noise-aware rule
(harness.regress): what got faster, slower, broken or fixed, what is new and what vanished.

    harness-compare before/results.jsonl after/results.jsonl
    python -m harness.compare A.jsonl B.jsonl --min-effect 0.03 --markdown report.md

Each file may hold several runs: the latest record of each case counts. Exit code 1 when
the second file regresses against the first, 0 when not, 2 for a bad file.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

from harness.record import Record
from harness.regress import Thresholds, compare, point_from_record


def load(path: str) -> list[Record]:
    p = Path(path)
    if not p.is_file():
        raise SystemExit(f"compare: {path}: no such file (give the results.jsonl of a run)")
    records = []
    for n, line in enumerate(p.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(Record.from_dict(json.loads(line)))
        except (ValueError, TypeError) as e:
            raise SystemExit(f"compare: {path}, line {n}: not a harness record ({e})") from None
    if not records:
        raise SystemExit(f"compare: {path} holds no records")
    return records


def _when_ms(r: Record) -> int:
    try:
        return int(dt.datetime.fromisoformat(r.timestamp).timestamp() * 1000)
    except ValueError:
        return 0


def latest(records: list[Record]) -> dict[tuple, "object"]:
    """The latest point of each case key."""
    points = {}
    for r in sorted(records, key=_when_ms):
        p = point_from_record(r, _when_ms(r))
        points[p.key] = p
    return points


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="harness-compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("before", help="results.jsonl of the earlier run (the baseline)")
    ap.add_argument("after", help="results.jsonl of the later run")
    ap.add_argument("--min-effect", type=float, default=Thresholds.min_effect,
                    help="never flag a relative change smaller than this (default %(default)s)")
    ap.add_argument("--noise-k", type=float, default=Thresholds.noise_k,
                    help="... or smaller than this many times the measured noise (default %(default)s)")
    ap.add_argument("--min-abs-us", type=float, default=Thresholds.min_abs_us,
                    help="... or smaller than this in microseconds (default %(default)s)")
    ap.add_argument("--markdown", default=None, help="also write the report to this file")
    a = ap.parse_args(argv)
    try:
        before, after = latest(load(a.before)), latest(load(a.after))
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    th = Thresholds(min_effect=a.min_effect, noise_k=a.noise_k, min_abs_us=a.min_abs_us, history=1)
    report = compare(list(after.values()), {k: [p] for k, p in before.items()}, th)
    text = report.markdown(f"{a.after} against {a.before}",
                           [f"thresholds: a change counts above max({th.min_effect:.0%}, {th.noise_k:g} x the "
                            f"noise) and {th.min_abs_us:g} us"])
    print(text)
    if a.markdown:
        Path(a.markdown).write_text(text + "\n")
    return 1 if report.regressions else 0


if __name__ == "__main__":
    sys.exit(main())
