"""The Hydra entry point: config -> plan -> run each case -> sinks.

    harness op=rmsnorm impl=all
    harness op=all impl=eager sweep=smoke
    harness -m op=rmsnorm,softmax impl=triton      # multirun: one job per op
"""
from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import sys
import uuid
from collections import Counter
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig
from omegaconf.errors import ValidationError as OmegaConfValidationError

from harness.run import device as devices
from harness.run import plan as planning
from harness.measure import provenance
from harness.run import multirun  # noqa: F401 - the job folder resolver, the multirun summary
from harness.commands import keys
from harness import registry
from harness.records import report
from harness.measure import roofline
from harness.commands.options import (case_timeout_of, check_run_folders, check_tracking_uri, check_values, help_text,
                             normalize_argv, processes_of, seed_of, settings_from)
from harness.entry import INTERRUPTED_EXIT   # an interrupted run exits with it after its table
from harness.errors import ConfigError
from harness.run.interrupts import sigint_once
from harness.run.progress import RunProgress
from harness.records.record import NOT_RUN, Record
from harness.run.runner import CPU_THREADS, Runner, Settings
from harness.run.session import NOT_WRITTEN, Session
from harness.records.sinks import Sinks, console
from harness.records.sinks.jsonl import JsonlSink, why_not_written
from harness.records.sinks.mlflow import MlflowLogger
from harness.records.sinks.mlflow_run import MlflowSink, upload_command

# Libraries whose INFO lines a run would print among its own: MLflow's as it makes a local
# store ("Creating initial MLflow database tables...") and alembic's migrations under it.
# Their warnings and errors still show.
QUIET_LOGGERS = ("mlflow", "alembic")


def quiet_libraries() -> None:
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")   # MLflow sets its loggers from it on import
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def run(cfg: DictConfig) -> int:
    quiet_libraries()
    check_values(cfg)
    check_tracking_uri(cfg)
    device = devices.resolve(cfg.device)
    processes = processes_of(cfg)
    given_seed = seed_of(cfg)
    case_timeout_of(cfg)
    if not cfg.isolate:   # no worker to kill: a hang held the run past case_timeout_s, unsaid
        print("harness: isolate=false: the cases run in this process, so case_timeout_s is not enforced and a "
              "crash or hang ends the run (the records before it stay in results.jsonl)", file=sys.stderr)
    planning.resolve_sweep(cfg, device)
    the_plan = planning.build(cfg, device)
    provenance.pin_source_tree()   # once, for every worker: the sources as the run began
    if problem := roofline.cache_unwritable():
        print(f"harness: HARNESS_CACHE: {problem}: nothing is kept there (the roof is "
              "measured again each run, builds that write there fail); set HARNESS_CACHE to a writable folder",
              file=sys.stderr)
    frameworks = registry.frameworks()
    warming = planning.warm(the_plan, frameworks)
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    invocation_id = uuid.uuid4().hex
    seed = given_seed if given_seed is not None else secrets.randbelow(2**31)
    settings = settings_from(cfg, invocation_id, seed)
    jsonl = JsonlSink(out_dir / "results.jsonl")
    tracker = _tracker(cfg, jsonl.path, invocation_id)   # opens its store while the first cases run

    n = len(the_plan.cases)
    print(f"harness: {n} cases ({len(the_plan.runnable)} to run) on {device}, sweep={the_plan.sweep}, "
          f"seed={seed}, results -> {jsonl.path}", flush=True)
    if device.type != "cuda":
        print(f"harness: on {device} each case runs on {CPU_THREADS} PyTorch thread (its default, a thread per "
              "core, fights other processes for the cores and multiplies a small case's time); recorded as "
              "provenance.cpu_threads", flush=True)
    if slow := planning.slow_on_cpu(the_plan):
        print(f"harness: sweep={the_plan.sweep} on {device}: {slow}", flush=True)
    session = Session(the_plan.cases, processes, device, settings, lambda: _runner(cfg, device, settings),
                      building=lambda impl: impl in warming and not frameworks[impl].ready())
    try:
        with RunProgress(n) as bar:
            sinks = Sinks(jsonl, bar, *([tracker] if tracker is not None else []))
            for record in session.records(bar, halted=lambda: jsonl.error):
                sinks.write(record)
        return _conclude(cfg, session.done, session.interrupted, jsonl, tracker, out_dir)
    except KeyboardInterrupt:
        print(f"harness: interrupted (SIGINT) after the cases, as the table, report or MLflow run were written: "
              f"every record is in {jsonl.path}", file=sys.stderr)
        if tracker is not None:
            print(f"To complete MLflow:\n  {upload_command(jsonl.path, cfg.tracking.uri)}", file=sys.stderr)
        return INTERRUPTED_EXIT


def _tracker(cfg: DictConfig, results: Path, invocation_id: str) -> MlflowSink | None:
    """The MLflow sink, its store opened in its own thread (None: tracking off)."""
    tr = cfg.tracking
    if not tr.enabled or not tr.uri:
        return None

    return MlflowSink(lambda: MlflowLogger(str(tr.uri), str(tr.experiment), tr.get("parent_run_id"), tr.get("group")),
                      str(tr.uri), results, invocation_id)


def _conclude(cfg: DictConfig, records: list[Record], interrupted: bool, jsonl: JsonlSink,
              tracker: MlflowSink | None, out_dir: Path) -> int:
    """The table, the report, the MLflow run closed; the exit code. Where the run's folder
    could not take a record or the table (``unwritten``: its disk full), the table is printed
    and nothing more is written there, the MLflow run ends FAILED, one line says what is
    where, and the exit code is 1."""
    table = console.render(records)
    print(table)
    artifacts, unwritten = [jsonl.path], jsonl.error
    if not unwritten:
        try:
            (out_dir / "table.txt").write_text(table + "\n")
            artifacts.append(out_dir / "table.txt")
        except OSError as e:
            unwritten = why_not_written(out_dir / "table.txt", e)
            with contextlib.suppress(OSError):
                (out_dir / "table.txt").unlink()
    if not unwritten:
        try:
            report_paths = report.write(records, out_dir,
                                        title=f"harness {' '.join(HydraConfig.get().overrides.task)}")
            artifacts += [report_paths[0], out_dir / report.PLOTS]
            print(f"\nreport: {report_paths[0]} ({len(report_paths) - 1} plots)")
        except OSError as e:   # its folder's disk full: the line names the file (a plot's, or the page's)
            unwritten = why_not_written(Path(e.filename or out_dir / report.REPORT), e)
        except Exception as e:  # noqa: BLE001 - a report that cannot be drawn must not cost the run
            print(f"harness: no report: {type(e).__name__}: {e}", file=sys.stderr)
    print(f"results: {jsonl.path}")
    if tracker is not None:
        interrupted = tracker.close(records, artifacts, interrupted, bool(unwritten))
    if unwritten:
        not_run = sum(r.reason.startswith(NOT_WRITTEN) for r in records)
        logged = tracker is not None and tracker.finished
        kept = (f"{jsonl.written} of {len(records)} records are in {jsonl.path.name}, the rest in the table above"
                + (" and MLflow" if logged else "") + f" ({not_run} cases not run); free space and "
                "run them again" if jsonl.error else
                f"every record is in {jsonl.path}; free space, then harness-report draws the report from it")
        print(f"harness: error: {unwritten}; {kept}", file=sys.stderr)
    if interrupted:   # every record is kept; the exit code says the run did not finish
        not_run = sum(1 for r in records if r.reason == NOT_RUN)
        print(f"harness: interrupted (SIGINT): {not_run} cases not run, recorded as skipped", file=sys.stderr)
        return INTERRUPTED_EXIT
    counts = Counter(r.status for r in records)
    bad = sum(v for k, v in counts.items() if k in ("fail", "invalid", "error", "crash", "timeout", "oom"))
    bad -= sum(1 for r in records if r.negative_control and r.status == "fail")
    return 1 if unwritten or (cfg.strict and bad) else 0


def _runner(cfg: DictConfig, device, settings: Settings):
    if cfg.isolate:
        from harness.run.worker import IsolatedRunner
        return IsolatedRunner(device, settings, case_timeout_of(cfg))
    return Runner(device, settings)


# An absolute path: Hydra would read "../conf" as a Python package next to this module.
@hydra.main(version_base="1.3", config_path=str(planning.CONF_DIR), config_name="config")
def _hydra_main(cfg: DictConfig) -> None:
    code = run_guarded(cfg)
    # In a multirun a job's exit would end the sweep (Hydra re-raises it) before the other
    # jobs and the summary: the job's code is kept, and the summary exits with the worst.
    # An interrupt (Ctrl-C, a time limit) ends the sweep.
    if code and (code == INTERRUPTED_EXIT or not multirun.keep_exit_code(code)):
        sys.exit(code)


def run_guarded(cfg: DictConfig) -> int:
    """``run``, its bad input an error line (exit 2), and a SIGINT before the first case (from
    the first case on, ``run`` handles its own: the table, MLflow, exit 130) a line, exit
    130: a Ctrl-C while the plan is made or the frameworks load is no crash."""
    try:
        with sigint_once():   # a time limit's SIGINT comes twice (harness.run.interrupts)
            return run(cfg)
    except (ConfigError, OmegaConfValidationError) as e:   # the latter: an interpolation of the wrong type
        print(f"harness: error: {str(e).splitlines()[0] if not isinstance(e, ConfigError) else e}"
              + (f" ({e.full_key})" if getattr(e, "full_key", None) else ""), file=sys.stderr)
        _drop_empty_run_folder()
        return 2
    except KeyboardInterrupt:
        print("harness: interrupted (SIGINT) before the first case: nothing was recorded", file=sys.stderr)
        _drop_empty_run_folder()
        return INTERRUPTED_EXIT


def _drop_empty_run_folder() -> None:
    """Remove the run folder Hydra made for a run that recorded nothing (it holds only Hydra's
    own ``.hydra``), so that ``outputs/`` lists runs, not refused command lines. A multirun's
    job folders are left to its summary; a folder holding anything else is left alone."""
    try:
        hydra_cfg = HydraConfig.get()
        if hydra_cfg.mode == RunMode.MULTIRUN:
            return
        folder = Path(hydra_cfg.runtime.output_dir)
        if [p.name for p in folder.iterdir()] != [".hydra"]:
            return
        shutil.rmtree(folder / ".hydra")
        folder.rmdir()
        if folder.parent.parent.name == "outputs":   # Hydra's outputs/<date>/<time>: the date's folder too
            folder.parent.rmdir()
    except (OSError, ValueError):   # not empty after all, or not under Hydra: nothing to drop
        pass


def main() -> None:
    if any(a in ("--help", "-h") for a in sys.argv[1:]):
        print(help_text())
        sys.exit(0)
    try:
        keys.check(sys.argv[1:], planning.CONF_DIR)
        check_run_folders(sys.argv[1:])
    except ConfigError as e:
        print(f"harness: error: {e}", file=sys.stderr)
        sys.exit(2)
    sys.argv = normalize_argv(sys.argv)
    _hydra_main()

