"""MLflow's copy of a run's records, logged behind the cases by a thread of its own.

Logging a record to a local sqlite store takes tens of milliseconds, and opening a new
store (MLflow's import, its tables) seconds: done between cases, the GPU would idle that
long. So the thread opens the store as the run starts and logs each record while the next
cases run; ``write`` only queues it. Every record is in the results file before it is
queued, so MLflow can lose none: where the store cannot be opened, logging fails, or a
SIGINT stops the wait for the last records, the rest stays there, one line says why, and
the run ends with the command that uploads it (harness-upload: idempotent).
"""
from __future__ import annotations

import queue
import sys
import threading
from pathlib import Path
from typing import Callable

from harness.run.interrupts import SigintHold
from harness.records.record import Record
from harness.records.sinks.mlflow import MlflowLogger, TrackingUnavailable, explain

LOGGING_CUT = "MLflow logging interrupted (SIGINT)"
# The end of a run waits this long for the thread before it says what it waits for.
QUIET_WAIT_S = 1.0

_CLOSE = object()   # the queue's last item: the records are all in, end the runs


def upload_command(path: Path, uri: str) -> str:
    from harness.records.upload import command
    return command([str(path), "--tracking-uri", uri])


class MlflowSink:
    """``write(record)`` queues the record for the thread; ``close`` waits for it, ends the
    MLflow runs and prints where they are, or what was not uploaded and the command that
    uploads it. ``open_logger()`` (run in the thread) opens the store."""

    def __init__(self, open_logger: Callable[[], MlflowLogger], uri: str, results: Path, invocation_id: str):
        self.uri, self.results, self.invocation_id = uri, Path(results), invocation_id
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.logger: MlflowLogger | None = None
        self.note = ""        # why MLflow stopped taking records ("" while it takes them); set by the thread
        self.line = ""        # the one line a user is told of it, as it happens
        self.said = False
        self.cut = threading.Event()   # a SIGINT stopped the wait: the thread logs nothing more
        self.closing = threading.Event()   # every record is queued and the run waits for the thread
        self.ended = threading.Event()     # the thread is done: the runs ended, or left to harness-upload
        self.queued = self.logged = 0
        self.finished = False          # the invocation run closed as its records tell it
        self.end_error = ""            # why the runs could not be ended
        self._close_args: tuple = ()
        self._shown: str | None = None   # the artifact the UI opens the run on: its report page
        self.thread = threading.Thread(target=self._work, args=(open_logger,), name="harness-mlflow", daemon=True)
        self.thread.start()

    # --- the run's thread (main) ---

    def write(self, rec: Record) -> None:
        self._say()
        self.queued += 1
        self.queue.put(rec)

    def close(self, records: list[Record], artifacts: list, interrupted: bool, unwritten: bool) -> bool:
        """Wait for the thread to log the records still queued and close the invocation run
        (``unwritten``: the run could not write its records, FAILED); whether the run was
        interrupted. A SIGINT while it waits stops MLflow where it is: its runs are ended
        KILLED, the records not logged stay in the results file, and the run is interrupted."""
        with SigintHold() as hold:   # a SIGINT waits for the wait below, where it is caught
            self._close_args = (records, artifacts, interrupted, unwritten)
            self.queue.put(_CLOSE)
            self.closing.set()
            try:
                self._wait(hold, QUIET_WAIT_S)
                if not self.ended.is_set():
                    print(f"MLflow: logging the last {max(0, self.queued - self.logged)} records (Ctrl-C stops "
                          f"it; they stay in {self.results})", flush=True)
                self._wait(hold)
            except KeyboardInterrupt:
                interrupted = True
                self.cut.set()
                print(f"harness: {LOGGING_CUT}; the rest stays in {self.results}", file=sys.stderr)
                try:
                    self._wait(hold)   # the record being logged, then the runs ended KILLED
                except KeyboardInterrupt:
                    self.end_error = "interrupted (SIGINT) again"
        self._say()
        if self.finished:
            self._where()
        else:
            if self.cut.is_set() and not self.note:
                self.note = LOGGING_CUT
            if self.end_error:
                print(f"harness: the MLflow run could not be ended: {self.end_error}", file=sys.stderr)
            left = f"; {len(records) - self.logged} of {len(records)} records not logged" if self.logger else ""
            when = "When the store can be opened" if self.uri.startswith("sqlite:") else "When the server is back"
            print(f"MLflow: not uploaded ({self.note}{left}). {when}:\n  {upload_command(self.results, self.uri)}")
        return interrupted

    def _wait(self, hold: SigintHold, timeout_s: float | None = None) -> None:
        """Wait for the thread's end, SIGINT released. An Event, not ``Thread.join``: a join
        a KeyboardInterrupt cut takes the thread for ended (CPython 3.11) and returns at once."""
        with hold.released():
            self.ended.wait(timeout_s)

    def _say(self) -> None:
        """The thread's news, on the run's output in its order: once, as the next record comes."""
        if self.line and not self.said:
            self.said = True
            print(f"harness: {self.line}", file=sys.stderr)

    def _where(self) -> None:
        page = self.logger.ui_path(self.invocation_id, self._shown)
        if self.logger.uri.startswith("sqlite:"):
            mlflow_cli = Path(sys.executable).parent / "mlflow"
            mlflow_cli = mlflow_cli if mlflow_cli.exists() else "mlflow"
            print(f"MLflow: {self.logger.uri}\n  open the UI with: {mlflow_cli} ui --backend-store-uri "
                  f"{self.logger.uri}\n  then http://127.0.0.1:5000{page}")
        else:
            print(f"MLflow: {self.logger.uri} ({self.logger.uri.rstrip('/')}{page})")

    # --- the sink's thread ---

    def _work(self, open_logger: Callable[[], MlflowLogger]) -> None:
        try:
            self._log_all(open_logger)
        finally:
            self.ended.set()

    def _log_all(self, open_logger: Callable[[], MlflowLogger]) -> None:
        try:
            self.logger = open_logger()
        except TrackingUnavailable as e:
            self._stop(str(e), f"MLflow not used: {e}. Records stay in {self.results}.")
        except Exception as e:  # noqa: BLE001 - a broken store must not cost the run
            note = f"MLflow could not be used: {explain(e)}"
            self._stop(note, f"MLflow not used: {note}. Records stay in {self.results}.")
        while (rec := self.queue.get()) is not _CLOSE:
            if self.note or self.cut.is_set():
                continue
            try:
                self.logger.log(rec)
                self.logged += 1
            except Exception as e:  # noqa: BLE001 - logging must never cost a result
                note = f"MLflow logging failed: {explain(e)}"
                self._stop(note, f"{note}; the rest stays in {self.results}")
        if self.logger is not None:
            self._end_runs()

    def _stop(self, note: str, line: str) -> None:
        self.note, self.line = note, line

    def _end_runs(self) -> None:
        """The invocation run closed with its counts and artifacts; where logging stopped (a
        SIGINT) or closing failed, its runs only ended, never left RUNNING. A logging failure
        leaves them to harness-upload, which ends them as the records tell it."""
        records, artifacts, interrupted, unwritten = self._close_args
        status = "KILLED" if interrupted else "FAILED" if unwritten else "FINISHED"
        self._shown = next((Path(a).name for a in artifacts if Path(a).suffix == ".html"), None)
        if self.note:
            return
        if not self.cut.is_set():
            try:
                self.logger.finish(self.invocation_id, records, artifacts, interrupted,
                                   status="FAILED" if unwritten else None)
                self.finished = True
                return
            except Exception as e:  # noqa: BLE001
                self.note = f"MLflow finish failed: {explain(e)}"
        try:
            self.logger.end(self.invocation_id, "KILLED" if self.cut.is_set() else
                            status if status != "FINISHED" else "FAILED")
        except Exception as e:  # noqa: BLE001 - the records are in the JSONL; upload ends the run
            self.end_error = explain(e)
