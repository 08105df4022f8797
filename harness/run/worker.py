"""Process isolation: cases run in a worker process, so that a kernel that crashes the
process, corrupts the CUDA context (an illegal address is sticky for the whole process)
or hangs costs only its own case. The worker is restarted after such a case; the case
gets a ``crash``, ``timeout`` or ``error`` record, and the next case runs in a fresh one.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
import traceback

import torch

from harness.run import progress
from harness.measure.integrity import TRACED
from harness.records.record import Record
from harness.run.runner import CaseSpec, Runner, Settings, base_record

# Errors after which a CUDA context is unusable: the worker must be replaced.
STICKY = ("illegal memory access", "illegal instruction", "misaligned address",
          "unspecified launch failure", "device-side assert", "CUDA error", "AcceleratorError")


def _serve(conn, device: str, settings: Settings) -> None:
    # A SIGINT to the process group (a terminal's Ctrl-C, a time limit's timeout) is the
    # parent's to handle: it keeps the records and stops this worker. Cut here, a case
    # would end as a crash of the worker instead.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    progress.report_to(lambda text: conn.send(("phase", text)))   # to the parent's progress
    try:
        runner = Runner(torch.device(device), settings)
        conn.send(("ready", {"roof": runner.roof.__dict__ if runner.roof else None,
                             "roof_error": runner.roof_error, "provenance": runner.provenance}))
    except Exception as e:  # noqa: BLE001
        conn.send(("failed", f"worker start failed: {type(e).__name__}: {e}\n{traceback.format_exc()}"))
        return
    while True:
        spec = conn.recv()
        if spec is None:
            return
        rec = runner.run(spec)
        rec.provenance = {**rec.provenance, "worker_pid": os.getpid()}   # which process ran it
        conn.send(("record", rec.as_dict()))


class IsolatedRunner:
    """Runs cases in a worker process with a per-case timeout; restarts it when needed."""

    # How long a worker asked to stop may take to exit before it is killed. It has sent
    # its last record by then and writes nothing at exit (the compile caches are written
    # as they fill), so nothing is lost; but an exit can be slow: a process
    # that used torch.compile shuts its pool of compile processes down at exit, and a
    # sweep's time limit can land there. processes=N stops a worker per process of a
    # case, so the wait is short: 2 s, then the kill.
    exit_grace_s = 2.0

    def __init__(self, device: torch.device, settings: Settings, case_timeout_s: float,
                 start_timeout_s: float = 900.0):
        self.device, self.settings = device, settings
        self.case_timeout_s, self.start_timeout_s = case_timeout_s, start_timeout_s
        self.ctx = mp.get_context("spawn")
        self.proc = None
        self.conn = None
        self.info: dict = {}

    def _start(self) -> None:
        parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_serve, args=(child, str(self.device), self.settings),
                                     daemon=True, name="harness-worker")
        self.proc.start()
        child.close()
        self.conn = parent
        message = self._receive(self.start_timeout_s)
        if message is None:
            self.stop()
            raise RuntimeError(f"the worker did not start within {self.start_timeout_s:.0f} s")
        kind, payload = message
        if kind != "ready":
            self.stop()
            raise RuntimeError(payload)
        self.info = payload

    def _receive(self, timeout_s: float):
        """The worker's next message other than a phase (phases go to this process's
        progress as they come), or None when ``timeout_s`` passes first."""
        deadline = time.monotonic() + timeout_s
        while self.conn.poll(max(0.0, deadline - time.monotonic())):
            kind, payload = self.conn.recv()
            if kind != "phase":
                return kind, payload
            progress.phase(payload)
        return None

    def stop(self, kill: bool = False) -> None:
        if kill:
            self._kill()
            return
        if self.conn is not None:
            try:
                self.conn.send(None)
            except (OSError, EOFError):
                pass
        if self.proc is not None:
            self.proc.join(timeout=self.exit_grace_s)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(timeout=10)
        self.proc = self.conn = None

    def _kill(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=10)
        self.proc = self.conn = None

    def _record(self, spec: CaseSpec) -> Record:
        return base_record(spec, self.device, self.settings, self.info.get("provenance", {}))

    def run_fresh(self, spec: CaseSpec) -> Record:
        """The case in a new worker process (``processes=N``: harness.run.processes.run_cell).
        The worker stays for the next case."""
        self.stop()
        return self.run(spec)

    def run(self, spec: CaseSpec) -> Record:
        try:
            if self.proc is None:
                self._start()
        except Exception as e:  # noqa: BLE001
            rec = self._record(spec)
            rec.status, rec.reason = "error", f"{e}"
            return rec
        started = time.monotonic()
        try:
            self.conn.send(spec)
            message = self._receive(self.case_timeout_s)
            if message is None:
                self._kill()
                rec = self._record(spec)
                rec.status = "timeout"
                rec.reason = (f"no result within case_timeout_s={self.case_timeout_s:.0f} s; "
                              "the worker was killed (a hang, or raise case_timeout_s)")
                return rec
            _, payload = message
        except (EOFError, OSError, BrokenPipeError):
            code = self.proc.exitcode if self.proc is not None else None
            if self.proc is not None:
                self.proc.join(timeout=5)
                code = self.proc.exitcode
            self._kill()
            rec = self._record(spec)
            rec.status = "crash"
            rec.reason = (f"the worker process died during this case (exit code {code}, "
                          f"after {time.monotonic() - started:.1f} s); the next case runs in a new one")
            return rec
        rec = Record.from_dict(payload)
        if rec.stream_note.startswith(TRACED):
            self.stop()    # CUPTI stays attached to a traced process and slows what it times next
            return rec
        if rec.status == "error" and any(s in rec.reason for s in STICKY):
            self._kill()   # the CUDA context is poisoned: the next case gets a fresh process
            rec.reason += " [worker restarted: the CUDA context cannot be trusted after this]"
        return rec

