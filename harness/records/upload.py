"""harness-upload: send results.jsonl files to MLflow, e.g. after the server was down.

    harness-upload outputs/2026-11-29/12-00-00/results.jsonl --tracking-uri http://mlflow:5000
    harness-upload multirun/2026-11-29/         # every results.jsonl below a folder

Idempotent: records already uploaded (same record_id) are skipped, so it is safe to run
after every job, or twice. A run that was never ended (killed, or its store was down) is ended
as its records tell: KILLED, with n_not_run, where cases never ran.
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from harness.records import reader
from harness.records.sinks import jsonl
from harness.records.sinks.mlflow import TrackingUnavailable, counts, explain, upload, uri_problem


def find_files(paths: list[str]) -> list[Path]:
    files = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(p.rglob("results.jsonl"))
        elif p.exists():
            files.append(p)
        else:
            raise FileNotFoundError(f"{p}: no such file or folder")
    return files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="harness-upload", description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="results.jsonl files, or folders to search for them")
    ap.add_argument("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db"),
                    help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or sqlite:///mlflow.db)")
    ap.add_argument("--experiment", default="kernel-harness")
    ap.add_argument("--parent-run-id", default=os.environ.get("HARNESS_PARENT_RUN_ID"),
                    help="log invocations under this run (the nightly job's run)")
    ap.add_argument("--group", default=None, help="tag the runs with this group (the nightly job: nightly)")
    args = ap.parse_args(argv)
    if problem := uri_problem(args.tracking_uri):
        print(f"harness-upload: error: --tracking-uri: {problem}", file=sys.stderr)
        return 2
    try:
        files = find_files(args.paths)
    except FileNotFoundError as e:
        print(f"harness-upload: error: {e}", file=sys.stderr)
        return 2
    if not files:
        print(f"harness-upload: error: no results.jsonl under {', '.join(args.paths)}", file=sys.stderr)
        return 2
    total_new = total_old = 0
    unreadable = []   # one bad file must not keep the others' records from the server
    for f in files:
        try:
            # the cases only: a published results file (docs/results/<gpu>.jsonl) also holds
            # devtools/first-run's rows, which are no records (harness-results' rule)
            records, _ = reader.read(f)
        except jsonl.BadResults as e:
            print(f"harness-upload: error: {e}; left out, the other files are uploaded", file=sys.stderr)
            unreadable.append(f)
            continue
        try:
            new, old = upload(records, args.tracking_uri, args.experiment, args.parent_run_id, args.group)
        except Exception as e:  # noqa: BLE001 - the server or store failed: the records wait in the files
            why = str(e) if isinstance(e, TrackingUnavailable) else explain(e)
            print(f"harness-upload: error: {why}; {f} was not uploaded whole. When the store answers "
                  f"again (what is there is not uploaded twice):\n  {command(sys.argv[1:] if argv is None else argv)}",
                  file=sys.stderr)
            return 1
        not_run = counts(records)[0]["n_not_run"]
        print(f"{f}: {new} uploaded, {old} already there"
              + (f"; {not_run} cases never ran (their run was cut before them)" if not_run else ""))
        total_new += new
        total_old += old
    print(f"total: {total_new} uploaded, {total_old} already there, to {args.tracking_uri}")
    if unreadable:
        print(f"harness-upload: {len(unreadable)} of {len(files)} files could not be read (above): "
              f"{' '.join(map(str, unreadable))}", file=sys.stderr)
        return 2
    return 0


def command(args: list[str]) -> str:
    """This command with ``args``, as it can be run here: the script beside this Python (a
    venv's bin/, on the PATH or not), else ``python -m harness.records.upload``."""
    beside = Path(sys.executable).parent / "harness-upload"
    return f"{beside if beside.exists() else f'{sys.executable} -m harness.records.upload'} {shlex.join(args)}"


if __name__ == "__main__":
    sys.exit(main())
