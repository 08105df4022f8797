"""Two runs compared case by case, with the nightly job's noise-aware rule (harness.records.regress):
what got faster, slower, broken or fixed, what is new and what vanished.

    harness-compare before/results.jsonl after/results.jsonl
    harness-compare 3f1c...e9 a07b...12                      # two MLflow runs (invocation run ids)
    harness-compare runs:/3f1c...e9 after/results.jsonl --tracking-uri http://127.0.0.1:5000
    python -m harness.records.compare A.jsonl B.jsonl --min-effect 0.03 --markdown report.md

A side is a results.jsonl file (which may hold several runs: the latest record of each case
counts) or the id of an invocation run in MLflow, the one the harness prints after "MLflow:"
(its case runs are read; --tracking-uri, default $MLFLOW_TRACKING_URI or the local store).
Exit code 1 when the second side regresses against the first, 0 when not, 2 for a bad side.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
from pathlib import Path

from harness.records.record import Record
from harness.records.regress import CPU_WALL_FLOOR, Thresholds, compare, point_from_record, point_from_run
from harness.records.sinks import jsonl

RUN_ID = re.compile(r"^(?:runs:/)?([0-9a-f]{32})/?$")
LOCAL_STORE = "sqlite:///mlflow.db"   # conf/tracking/local.yaml's default


def load(path: str) -> list[Record]:
    p = Path(path)
    if not p.is_file():
        raise SystemExit(f"compare: {path}: no such file (give the results.jsonl of a run)")
    from harness.records import reader   # its rule for which rows are cases
    try:
        # A results file may hold rows that are not cases (docs/results/<gpu>.jsonl keeps
        # devtools/first-run's timings beside its records): they are not compared.
        records, _ = reader.read(p)
    except jsonl.BadResults as e:
        raise SystemExit(f"compare: {e}") from None
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


def from_mlflow(run_id: str, uri: str) -> dict[tuple, object]:
    """The latest point of each case of one invocation run in MLflow."""
    from harness.records.sinks.mlflow import client_env, explain, normalize_uri, search_all
    client_env()
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:
        raise SystemExit("compare: reading MLflow runs needs mlflow (pip install mlflow)") from None
    uri = normalize_uri(uri)
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).is_file():
        raise SystemExit(f"compare: no MLflow store at {uri}; give --tracking-uri (the store the run logged to)")
    client = MlflowClient(uri)
    try:
        run = client.get_run(run_id)
    except Exception as e:  # noqa: BLE001 - an unknown id or an unreachable server
        missing = "RESOURCE_DOES_NOT_EXIST" in str(getattr(e, "error_code", "")) or "not found" in str(e).lower()
        raise SystemExit(f"compare: MLflow run {run_id} {'not found' if missing else 'could not be read'} "
                         f"at {uri}: {explain(e)}") from None
    kind = run.data.tags.get("harness.kind")
    if kind != "invocation":
        raise SystemExit(f"compare: MLflow run {run_id} is a {kind or 'foreign'} run; give an invocation run, "
                         f"the id the harness prints after 'MLflow:' (tag harness.kind = invocation)")
    flt = (f"tags.`harness.kind` = 'case' and "
           f"tags.`harness.invocation_id` = '{run.data.tags['harness.invocation_id']}'")
    points = {}
    runs = search_all(client, [run.info.experiment_id], flt, order_by=["attributes.start_time ASC"])
    for p in filter(None, map(point_from_run, runs)):
        points[p.key] = p   # oldest first: the latest of a case wins
    if not points:
        raise SystemExit(f"compare: MLflow run {run_id} has no case runs")
    return points


def side(source: str, uri: str) -> dict[tuple, object]:
    """A results file's or an MLflow invocation run's latest point per case."""
    if Path(source).is_file():
        return latest(load(source))
    found = RUN_ID.match(source)
    if found:
        return from_mlflow(found.group(1), uri)
    raise SystemExit(f"compare: {source}: no such file, nor an MLflow run id (32 hex digits, or runs:/<id>); "
                     "give the results.jsonl of a run or the run id the harness prints after 'MLflow:'")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="harness-compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("before", help="the earlier run (the baseline): its results.jsonl or MLflow run id")
    ap.add_argument("after", help="the later run: its results.jsonl or MLflow run id")
    ap.add_argument("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI", LOCAL_STORE),
                    help="where MLflow run ids are looked up (default: $MLFLOW_TRACKING_URI or %(default)s)")
    ap.add_argument("--min-effect", type=float, default=Thresholds.min_effect,
                    help="never flag a relative change smaller than this (default %(default)s)")
    ap.add_argument("--noise-k", type=float, default=Thresholds.noise_k,
                    help="... or smaller than this many times the measured noise (default %(default)s)")
    ap.add_argument("--min-abs-us", type=float, default=Thresholds.min_abs_us,
                    help="... or smaller than this in microseconds (default %(default)s)")
    ap.add_argument("--markdown", default=None, help="also write the report to this file")
    a = ap.parse_args(argv)
    try:
        before, after = side(a.before, a.tracking_uri), side(a.after, a.tracking_uri)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    th = Thresholds(min_effect=a.min_effect, noise_k=a.noise_k, min_abs_us=a.min_abs_us, history=1)
    report = compare(list(after.values()), {k: [p] for k, p in before.items()}, th)
    text = report.markdown(f"{a.after} against {a.before}",
                           [f"thresholds: a change counts above max({th.min_effect:.0%}, {th.noise_k:g} x the "
                            f"noise) and {th.min_abs_us:g} us; a CPU's wall-clock time above {CPU_WALL_FLOOR:.0%} "
                            "(the cores are shared); an interpreter's time (*) is never compared"])
    print(text)
    if a.markdown:
        Path(a.markdown).write_text(text + "\n")
    return 1 if report.regressions else 0


if __name__ == "__main__":
    sys.exit(main())
