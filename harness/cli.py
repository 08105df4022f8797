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

from harness import device as devices
from harness import plan as planning
from harness import provenance
from harness import multirun  # noqa: F401 - the job folder resolver, the multirun summary
from harness import keys, registry, report, roofline
from harness.options import (case_timeout_of, check_run_folders, check_tracking_uri, check_values, help_text,
                             normalize_argv, processes_of, seed_of, settings_from)
from harness.entry import INTERRUPTED_EXIT   # an interrupted run exits with it after its table
from harness.errors import ConfigError
from harness.interrupts import SigintHold, sigint_once
from harness.processes import InterruptedProcesses, run_cell
from harness.progress import RunProgress
from harness.record import INTERRUPTED, NOT_RUN, Record, case_label
from harness.runner import CPU_THREADS, CaseSpec, Runner, Settings, base_record
from harness.sinks import console
from harness.sinks.jsonl import JsonlSink, NotWritten, why_not_written
from harness.sinks.mlflow import explain as explain_tracking

def _tracker(cfg: DictConfig):
    tr = cfg.tracking
    if not tr.enabled or not tr.uri:
        return None, "tracking disabled"
    from harness.sinks.mlflow import MlflowLogger, TrackingUnavailable
    try:
        return MlflowLogger(str(tr.uri), str(tr.experiment), tr.get("parent_run_id"), tr.get("group")), ""
    except TrackingUnavailable as e:
        return None, str(e)
    except Exception as e:  # noqa: BLE001 - a broken store must not cost the run
        return None, f"MLflow could not be used: {explain_tracking(e)}"


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
    planning.warm(the_plan, registry.frameworks())
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    invocation_id = uuid.uuid4().hex
    seed = given_seed if given_seed is not None else secrets.randbelow(2**31)
    settings = settings_from(cfg, invocation_id, seed)
    jsonl = JsonlSink(out_dir / "results.jsonl")
    tracker, tracker_note = _tracker(cfg)
    if tracker is None and cfg.tracking.enabled:
        print(f"harness: MLflow not used: {tracker_note}. Records stay in {jsonl.path}.", file=sys.stderr)

    n = len(the_plan.cases)
    print(f"harness: {n} cases ({len(the_plan.runnable)} to run) on {device}, sweep={the_plan.sweep}, "
          f"seed={seed}, results -> {jsonl.path}", flush=True)
    if device.type != "cuda":
        print(f"harness: on {device} each case runs on {CPU_THREADS} PyTorch thread (its default, a thread per "
              "core, fights other processes for the cores and multiplies a small case's time); recorded as "
              "provenance.cpu_threads", flush=True)
    if slow := planning.slow_on_cpu(the_plan):
        print(f"harness: sweep={the_plan.sweep} on {device}: {slow}", flush=True)
    runner = None
    cut_tracker = None   # the MLflow logger a second SIGINT stopped: it still ends the runs it began
    records: list[Record] = []
    interrupted = False
    # SIGINT is held through the loop and released only while a case runs or MLflow logs a
    # record (harness.interrupts): there it is caught, and the run goes on as one cut in a
    # case (the cases not run recorded as skipped, the table, MLflow KILLED, exit 130); a
    # record is never cut between its measurement and its line in the JSONL.
    try:
        with RunProgress(n) as bar, SigintHold() as hold:
            for cell in cells(the_plan.cases, processes):
                stopped = interrupted or jsonl.error
                runnable = [spec for spec in cell if not spec.skip_reason] if not stopped else []
                measured: dict[int, Record] = {}
                if runnable:
                    first = runnable[0]
                    label = case_label(first.op, first.impl, first.variant, first.dtype, first.shape)
                    bar.case(label if processes == 1 else
                             f"{first.op} {first.dtype} {'x'.join(map(str, first.shape))}: {len(runnable)} "
                             f"impls, {processes} processes each")
                    try:
                        with hold.released():
                            if runner is None:
                                runner = _runner(cfg, device, settings)
                            measured, cut = _measure(runner, runnable, processes, device, settings)
                    except KeyboardInterrupt:   # as the runner started, or one that waited for this case
                        cut = True
                    if cut:
                        interrupted = True
                        print(f"harness: {CUT}", file=sys.stderr)
                for spec in cell:
                    rec = measured.get(id(spec))
                    if rec is None:
                        rec = base_record(spec, device, settings, {})
                        if interrupted and not spec.skip_reason:
                            rec.status, rec.reason = "skipped", NOT_RUN
                        elif jsonl.error and not spec.skip_reason:
                            rec.status, rec.reason = "skipped", f"{NOT_WRITTEN}: {jsonl.error}"
                    rec.invocation_id, rec.plan_cases = invocation_id, n
                    try:
                        jsonl.write(rec)
                    except NotWritten:   # kept for the table and MLflow; no more cases run
                        pass
                    records.append(rec)
                    bar.line(f"[{len(records)}/{n}] {_progress(rec)}")
                    if tracker is not None:
                        interrupted, failed = _log(tracker, rec, hold, interrupted)
                        if failed:
                            cut_tracker = tracker if failed == LOGGING_CUT else None
                            tracker, tracker_note = None, failed
                            print(f"harness: {failed}; the rest stays in {jsonl.path}", file=sys.stderr)
    except KeyboardInterrupt:   # one that waited for the loop's end: every record is kept
        interrupted = True
    try:
        interrupted = _stop(runner, interrupted)
        return _conclude(cfg, records, interrupted, jsonl, tracker, tracker_note, invocation_id, out_dir, cut_tracker)
    except KeyboardInterrupt:
        print(f"harness: interrupted (SIGINT) after the cases, as the table, report or MLflow run were written: "
              f"every record is in {jsonl.path}", file=sys.stderr)
        if cfg.tracking.enabled and cfg.tracking.uri:
            print(f"To complete MLflow:\n  {_upload_command(jsonl.path, cfg.tracking.uri)}", file=sys.stderr)
        return INTERRUPTED_EXIT


CUT = "interrupted: the remaining cases are recorded as skipped"
NOT_WRITTEN = "not run: the run stopped where its results file could not take a record"
LOGGING_CUT = "MLflow logging interrupted (SIGINT after the run was cut)"


def _log(tracker, rec: Record, hold: SigintHold, interrupted: bool) -> tuple[bool, str]:
    """MLflow's copy of a record the JSONL holds: (interrupted, why logging must stop, or "").
    A SIGINT while it is logged cuts the run as one in a case does, and the record is logged
    again (the logger replaces the run the cut left unfinished); a further SIGINT, or a
    failure, stops MLflow logging: the records stay in the JSONL, for harness-upload."""
    while True:
        try:
            with hold.released():
                tracker.log(rec)
            return interrupted, ""
        except KeyboardInterrupt:
            if interrupted:
                return True, LOGGING_CUT
            interrupted = True
            print(f"harness: {CUT}", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - logging must never cost a result
            return interrupted, f"MLflow logging failed: {explain_tracking(e)}"


def _conclude(cfg: DictConfig, records: list[Record], interrupted: bool, jsonl: JsonlSink, tracker,
              tracker_note: str, invocation_id: str, out_dir: Path, cut_tracker=None) -> int:
    """The table, the report, the MLflow run closed (``cut_tracker``: a logger a SIGINT or a
    failure stopped, which only ends its runs); the exit code. Where the run's folder could
    not take a record or the table (``unwritten``: its disk full), the table is printed and
    nothing more is written there, the MLflow run ends FAILED, one line says what is where,
    and the exit code is 1."""
    table = console.render(records)
    print(table)
    artifacts, unwritten, shown = [jsonl.path], jsonl.error, None
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
            shown = report_paths[0].name   # the UI opens the run on it: the comparison, impl x shape
            print(f"\nreport: {report_paths[0]} ({len(report_paths) - 1} plots)")
        except OSError as e:   # its folder's disk full: the line names the file (a plot's, or the page's)
            unwritten = why_not_written(Path(e.filename or out_dir / report.REPORT), e)
        except Exception as e:  # noqa: BLE001 - a report that cannot be drawn must not cost the run
            print(f"harness: no report: {type(e).__name__}: {e}", file=sys.stderr)
    print(f"results: {jsonl.path}")
    status = "KILLED" if interrupted else "FAILED" if unwritten else "FINISHED"
    if tracker is not None:
        try:
            tracker.finish(invocation_id, records, artifacts, interrupted, status="FAILED" if unwritten else None)
            page = tracker.ui_path(invocation_id, shown)
            if tracker.uri.startswith("sqlite:"):
                mlflow_cli = Path(sys.executable).parent / "mlflow"
                mlflow_cli = mlflow_cli if mlflow_cli.exists() else "mlflow"
                print(f"MLflow: {tracker.uri}\n  open the UI with: {mlflow_cli} ui --backend-store-uri {tracker.uri}\n"
                      f"  then http://127.0.0.1:5000{page}")
            else:
                print(f"MLflow: {tracker.uri} ({tracker.uri.rstrip('/')}{page})")
        except Exception as e:  # noqa: BLE001
            tracker_note = f"MLflow finish failed: {explain_tracking(e)}"
            cut_tracker, tracker = tracker, None   # its runs are still ended
    if cut_tracker is not None:
        try:
            cut_tracker.end(invocation_id, status if status != "FINISHED" else "FAILED")
        except Exception as e:  # noqa: BLE001 - the records are in the JSONL; upload ends the run
            print(f"harness: the MLflow run could not be ended: {explain_tracking(e)}", file=sys.stderr)
    if tracker is None and cfg.tracking.enabled and cfg.tracking.uri:
        when = "When the store can be opened" if cfg.tracking.uri.startswith("sqlite:") else "When the server is back"
        print(f"MLflow: not uploaded ({tracker_note}). {when}:\n  {_upload_command(jsonl.path, cfg.tracking.uri)}")
    if unwritten:
        not_run = sum(r.reason.startswith(NOT_WRITTEN) for r in records)
        kept = (f"{jsonl.written} of {len(records)} records are in {jsonl.path.name}, the rest in the table above"
                + (" and MLflow" if tracker is not None else "") + f" ({not_run} cases not run); free space and "
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


def _upload_command(path: Path, uri: str) -> str:
    from harness.upload import command
    return command([str(path), "--tracking-uri", uri])


def _measure(runner, runnable: list[CaseSpec], processes: int, device, settings: Settings
             ) -> tuple[dict[int, Record], bool]:
    """A cell's runnable cases run (``runner.run``, or ``processes`` rounds of fresh workers):
    their records by ``id(spec)``, and whether a SIGINT cut the cell. Cut, a case keeps the
    merge of its finished processes; the one the SIGINT landed in, with none, is an error;
    the cases it had not reached have no record (the caller marks them skipped)."""
    try:
        if processes == 1:
            return {id(runnable[0]): runner.run(runnable[0])}, False
        merged = run_cell(runner.run_fresh, runnable, processes,
                          lambda spec, k, rec: _process_done(k, processes, rec))
        return {id(spec): rec for spec, rec in zip(runnable, merged)}, False
    except KeyboardInterrupt as e:
        kept = e.records if isinstance(e, InterruptedProcesses) else [None]
        running = e.running if isinstance(e, InterruptedProcesses) else 0
        measured = {}
        for j, (spec, rec) in enumerate(zip(runnable, kept)):
            if rec is None and j == running:
                rec = base_record(spec, device, settings, {})
                rec.status, rec.reason = "error", INTERRUPTED
            if rec is not None:
                measured[id(spec)] = rec
        return measured, True


def cells(cases: list[CaseSpec], processes: int) -> list[list[CaseSpec]]:
    """The plan's cases in the groups that run together: with ``processes`` > 1 a cell, the
    consecutive cases of one op, dtype and shape (the plan is shape-major), whose processes
    interleave (harness.processes.run_cell); with one process a case at a time."""
    groups: list[list[CaseSpec]] = []
    for spec in cases:
        if processes > 1 and groups and _cell_key(groups[-1][0]) == _cell_key(spec):
            groups[-1].append(spec)
        else:
            groups.append([spec])
    return groups


def _cell_key(spec: CaseSpec) -> tuple:
    return spec.op, spec.dtype, spec.shape


def _process_done(k: int, n: int, rec: Record) -> None:
    """A line for each finished process of a cell, whose records come when all its rounds have run."""
    time = f"{rec.median_us:.2f} us" if rec.median_us is not None else rec.status
    print(f"  process {k} of {n}: {rec.case_label}: {time}", flush=True)


def _stop(runner, interrupted: bool) -> bool:
    """Stop the case runner (an isolated one's worker process); whether the run was
    interrupted. A SIGINT while the worker winds down (a time limit landing just after
    the last case, which would otherwise cost the run its table, though not its records:
    those are in the JSONL) kills the worker instead, and the table and the MLflow parent
    run still follow."""
    if runner is None or not hasattr(runner, "stop"):
        return interrupted
    try:
        runner.stop(kill=interrupted)
    except KeyboardInterrupt:
        print("harness: interrupted while the worker stopped: killed it", file=sys.stderr)
        runner.stop(kill=True)
        return True
    return interrupted


def _runner(cfg: DictConfig, device, settings: Settings):
    if cfg.isolate:
        from harness.worker import IsolatedRunner
        return IsolatedRunner(device, settings, case_timeout_of(cfg))
    return Runner(device, settings)


def _progress(r: Record) -> str:
    head = f"{r.case_label}: {console.status_label(r)}"
    if r.process_medians_us:
        head += (f" (median of {r.processes} process{'es' if r.processes != 1 else ''}: "
                 + ", ".join(f"{m:.2f}" for m in r.process_medians_us) + " us)")
    if r.status == "ok" and r.reason:   # e.g. interrupted after 2 of 3 processes
        head += f" [{r.reason[:160]}]"
    if r.gbps is not None:
        pct = f", {r.pct_roof:.1f}% of roof" if r.pct_roof is not None else ""
        return f"{head} {r.median_us:.1f} us, {console.sig(r.gbps)} GB/s{pct}"
    if r.median_us is not None:
        return f"{head} {r.median_us:.1f} us ({r.timer})"
    return f"{head} {r.reason[:200]}" if r.reason else head


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
        with sigint_once():   # a time limit's SIGINT comes twice (harness.interrupts)
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

