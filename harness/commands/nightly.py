"""harness-nightly: the nightly cluster job, with its regression report.

    harness-nightly run [hydra overrides...]       all three steps (what cron calls)
    harness-nightly start                          create the night's MLflow run, print its id
    harness-nightly jobs --night ID --out DIR ...  the Hydra multirun on Slurm (submitit)
    harness-nightly finish --night ID --out DIR    upload what waits, compare, report
    --tune (run, jobs)                             also harness-tune, report only

``jobs`` runs ``harness -m hydra/launcher=slurm op=<every op> impl=all sweep=full`` (one
Slurm job per op; any override after the options replaces or adds to those), every job
logging to the tracking server as a child of the night's run, and writing its records to
``DIR/jobs/<n>/results.jsonl`` on shared storage first. ``finish`` uploads every JSONL under
DIR (idempotent: records a job already logged are skipped), so a server that the compute
nodes could not reach loses nothing; then it compares the night's records with each case's
history on the server (or a pinned baseline night) and writes ``DIR/report.md``, printed and
logged as an artifact of the night's run. Exit status: 0 fine, 1 regressions, 2 bad
arguments or a results file that could not be read (named; the others were uploaded and
compared), 3 the tracking server could not be reached (the records wait in DIR), 4 the
multirun itself failed (no regression found in what it recorded).

With ``--tune``, ``jobs`` then runs ``harness-tune`` report only through the same launcher (a
job per op, each keeping its comparison in ``DIR/tune/<n>/tune.jsonl``), and ``finish`` lists
each entry where the search chose another config than the committed table as a finding: a
table to update, not a regression (the exit status does not change).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from harness import registry
from harness.records.regress import Thresholds, compare, load_history, point_from_record
from harness.records.sinks import jsonl
from harness.records.sinks.mlflow import MlflowLogger, TrackingUnavailable, upload

GROUP = "nightly"


def _logger(uri: str, experiment: str) -> MlflowLogger:
    return MlflowLogger(uri, experiment, None, GROUP)


def start(uri: str, experiment: str) -> str:
    """Create the night's run; its id is the parent of every job's runs."""
    logger = _logger(uri, experiment)
    now = dt.datetime.now(dt.timezone.utc)
    run = logger.client.create_run(logger.experiment_id, run_name=f"night {now:%Y-%m-%d %H:%M}",
                                   tags={"harness.kind": "night", "harness.group": GROUP,
                                         "mlflow.source.name": "harness-nightly"})
    return run.info.run_id


def default_jobs() -> list[str]:
    return [f"op={','.join(registry.ops())}", "impl=all", "sweep=full"]


def jobs(night: str | None, out: Path, uri: str, experiment: str, launcher: str, overrides: list[str],
         tune: bool = False) -> int:
    tracking = ([f"tracking.uri={uri}", f"tracking.experiment={experiment}", f"tracking.parent_run_id={night}",
                 f"tracking.group={GROUP}"] if night else ["tracking=none"])
    keys = {o.split("=", 1)[0].lstrip("+~") for o in overrides}
    base = [o for o in default_jobs() if o.split("=", 1)[0] not in keys]
    cmd = [sys.executable, "-m", "harness", "-m", f"hydra/launcher={launcher}",
           f"hydra.sweep.dir={out / 'jobs'}", *base, *tracking, *overrides]
    print("harness-nightly: " + " ".join(cmd), flush=True)
    code = subprocess.call(cmd)
    if tune:
        cmd = [sys.executable, "-m", "harness.commands.tune", "-m", f"hydra/launcher={launcher}",
               f"hydra.sweep.dir={out / TUNE_DIR}", *base, *overrides]
        print("harness-nightly: " + " ".join(cmd), flush=True)
        tuned = subprocess.call(cmd)
        if tuned:
            print(f"harness-nightly: harness-tune's multirun exited with {tuned}; its findings are what its jobs "
                  "kept", file=sys.stderr)
    return code


TUNE_DIR = "tune"


def tune_findings(out: Path) -> tuple[list[str], list[str]]:
    """(notes, lines) of harness-tune's jobs under ``out/tune``: a line per entry whose search
    chose another config than the table holds, or saw something go wrong
    (harness.commands.tune.line); a note per job that kept no comparison."""
    folder = out / TUNE_DIR
    if not folder.is_dir():
        return [], []
    from harness.commands.tune import TUNE_FILE, line
    from harness.run.multirun import job_folders
    comparisons, notes = [], []
    jobs = job_folders(folder)
    for job in jobs:
        try:
            comparisons += [json.loads(text) for text in (job / TUNE_FILE).read_text().splitlines() if text.strip()]
        except FileNotFoundError:
            notes.append(f"harness-tune: job {job.name} kept no comparison: its log (in {folder}/.submitit/ on "
                         "Slurm) says why")
        except (OSError, ValueError) as e:
            notes.append(f"harness-tune: {job / TUNE_FILE} unreadable ({type(e).__name__}: {e}); left out")
    said = [c for c in comparisons if c.get("changed") or c.get("warnings")]
    notes.append(f"harness-tune: {len(comparisons)} entries searched in {len(jobs)} jobs, "
                 f"{sum(bool(c.get('changed')) for c in comparisons)} where the search chose another config than "
                 "the table (findings, not regressions)")
    lines = []
    for c in said:
        try:
            lines.append(line(c))
        except (KeyError, TypeError) as e:   # a comparison another version of harness-tune wrote
            notes.append(f"harness-tune: an entry of another form left out ({type(e).__name__}: {e})")
    return notes, lines


def finish(night: str | None, out: Path, uri: str, experiment: str, baseline: str | None,
           th: Thresholds) -> int:
    if not out.is_dir():
        print(f"harness-nightly: {out}: no such folder; give --out the night's folder (where its jobs wrote "
              "jobs/<n>/results.jsonl)", file=sys.stderr)
        return 2
    files = sorted(out.rglob("results.jsonl"))
    records, unreadable = read_jobs(files)
    notes = [f"{len(records)} records from {len(files) - len(unreadable)} jobs under {out}"]
    notes += [f"left out, unreadable: {why}" for why in unreadable]
    try:
        logger = _logger(uri, experiment)
    except TrackingUnavailable as e:
        print(f"harness-nightly: {e}; the records wait in {out}: run finish again later", file=sys.stderr)
        return 3
    client = logger.client
    if night is None:   # the server was down at the start: the night's run is made now
        night = start(uri, experiment)
        notes.append("the tracking server was unreachable when the night started; its records were uploaded now")
    from mlflow.exceptions import MlflowException
    try:   # before anything is uploaded under it
        night_run = client.get_run(night)
    except MlflowException as e:
        if e.error_code not in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):   # the server failed
            print(f"harness-nightly: {uri} did not answer for the night's run ({e.error_code}: "
                  f"{str(e)[:200]}); the records wait in {out}: run finish again later", file=sys.stderr)
            return 3
        print(f"harness-nightly: --night {night}: no such run on {uri}; give the id that start printed "
              "(or leave --night out: finish then makes the night's run)", file=sys.stderr)
        return 2
    new, old = upload(records, uri, experiment, parent_run_id=night, group=GROUP)
    notes.append(f"uploaded {new} records that had not reached the server; {old} were there already")
    history = load_history(client, logger.experiment_id, group=GROUP, before_ms=night_run.info.start_time,
                           baseline=baseline, exclude_parent=night)
    notes.append(f"history: {'pinned baseline night ' + baseline if baseline else f'the last {th.history} nights'}"
                 f" ({sum(len(v) for v in history.values())} points of {len(history)} cases); "
                 f"threshold max({th.min_effect:.0%}, {th.noise_k:g} x noise) and at least {th.min_abs_us:g} us")
    report = compare([point_from_record(r) for r in records], history, th)
    tune_notes, tune_lines = tune_findings(out)
    text = report.markdown(f"Nightly regression report {dt.date.today():%Y-%m-%d}", notes + tune_notes)
    if tune_lines:
        text += ("\n## Launch configs the search would change or warns of (harness-tune, report only)\n\n"
                 + "\n".join(f"- {c}" for c in tune_lines) + "\n")
    (out / "report.md").write_text(text + "\n")
    print(text)
    client.log_artifact(night, str(out / "report.md"))
    from mlflow.entities import Metric
    now = int(time.time() * 1000)
    client.log_batch(night, metrics=[Metric(k, float(v), now, 0) for k, v in (
        ("regressions", len(report.regressions)), ("improvements", len(report.improvements)),
        ("new", len(report.new)), ("vanished", len(report.vanished)), ("records", len(records)),
        ("unreadable_files", len(unreadable)))])
    client.set_terminated(night, "FAILED" if report.regressions or unreadable else "FINISHED")
    if unreadable:
        print(f"harness-nightly: {len(unreadable)} results files could not be read and were left out (above); "
              "the rest was uploaded and compared", file=sys.stderr)
        return 2
    return 1 if report.regressions else 0


def read_jobs(files: list[Path]) -> tuple[list, list[str]]:
    """The records of every job's results file, and what is wrong with each file that cannot
    be read (named on its own line as it is met). One unreadable file must not cost the
    night the others: they are uploaded and compared, and the exit status says what was
    left out."""
    records, unreadable = [], []
    for f in files:
        try:
            records += jsonl.read(f)
        except jsonl.BadResults as e:
            print(f"harness-nightly: {e}; left out, the other files are used", file=sys.stderr)
            unreadable.append(str(e))
    return records, unreadable


def main(argv: list[str] | None = None) -> int:
    """Exit 2 with one line for a configuration the harness refuses (a plugin that does not
    import, an unknown op), as the harness itself does."""
    from harness.errors import ConfigError
    try:
        return _main(argv)
    except ConfigError as e:
        print(f"harness-nightly: error: {e}", file=sys.stderr)
        return 2


def _main(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(prog="harness-nightly", description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=("run", "start", "jobs", "finish"))
    ap.add_argument("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI", "http://localhost:5000"))
    ap.add_argument("--experiment", default="kernel-harness")
    ap.add_argument("--out", type=Path, default=None,
                    help="the night's folder on shared storage (default: $HARNESS_NIGHTLY_DIR or ./nightly, "
                         "then the UTC date and time)")
    ap.add_argument("--night", default=None, help="the night's run id (from start)")
    ap.add_argument("--launcher", default="slurm", help="Hydra launcher config (conf/hydra/launcher/)")
    ap.add_argument("--baseline", default=None, help="compare with this night's run id instead of history")
    ap.add_argument("--min-effect", type=float, default=Thresholds.min_effect)
    ap.add_argument("--noise-k", type=float, default=Thresholds.noise_k)
    ap.add_argument("--min-abs-us", type=float, default=Thresholds.min_abs_us)
    ap.add_argument("--history", type=int, default=Thresholds.history)
    ap.add_argument("--tune", action="store_true",
                    help="run and jobs: also harness-tune, report only; finish lists its changed configs")
    args, overrides = ap.parse_known_args(argv)
    bad = [o for o in overrides if "=" not in o]
    if bad:
        ap.error(f"not a Hydra override (key=value): {' '.join(bad)}")
    th = Thresholds(args.min_effect, args.noise_k, args.min_abs_us, args.history)
    out = args.out or Path(os.environ.get("HARNESS_NIGHTLY_DIR", "nightly")) / \
        dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H-%M-%S")
    out = out.resolve()
    if args.step == "start":
        try:
            print(start(args.tracking_uri, args.experiment))
            return 0
        except TrackingUnavailable as e:
            print(f"harness-nightly: {e}", file=sys.stderr)
            return 3
    if args.step in ("jobs", "finish") and args.out is None:
        ap.error(f"{args.step} needs --out, the night's folder")
    if args.step == "jobs":
        return jobs(args.night, out, args.tracking_uri, args.experiment, args.launcher, overrides, args.tune)
    if args.step == "finish":
        return finish(args.night, out, args.tracking_uri, args.experiment, args.baseline, th)
    out.mkdir(parents=True, exist_ok=True)
    try:
        night = start(args.tracking_uri, args.experiment)
        print(f"harness-nightly: night {night}, folder {out}", flush=True)
    except TrackingUnavailable as e:
        night = None
        print(f"harness-nightly: {e}; the jobs write JSONL only, uploaded at the end", file=sys.stderr)
    code = jobs(night, out, args.tracking_uri, args.experiment, args.launcher, overrides, args.tune)
    if code:
        print(f"harness-nightly: the multirun exited with {code}; comparing what the jobs recorded",
              file=sys.stderr)
    result = finish(night, out, args.tracking_uri, args.experiment, args.baseline, th)
    return 4 if result == 0 and code else result


if __name__ == "__main__":
    sys.exit(main())
