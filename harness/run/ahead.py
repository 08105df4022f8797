"""Compiling ahead: on a GPU, a side process per framework runs each of its runnable cases'
binds and first launches, in the plan's order, ahead of the worker, so that the worker finds each
framework's kernels in its disk cache (Triton's, Numba's, CuPy's, Inductor's) instead of
compiling them between its cases. On a fresh H100, first compiles were 51 of rmsnorm's 141
seconds; the side process compiles on other cores while the worker checks and times.

What it runs is what a case's checks run before anything is compared: every input set's
bind and launch, and the binds of the batch-invariance check. It checks, times and records
nothing; an error there is the worker's to meet and report. Its GPU work is small launches
and their inputs, and it is stopped (SIGSTOP) whenever the worker times (``paused``): a
launch it had queued then is at most one case's, well inside the timer's 25 ms warm-up.

A process lives until the run ends it (``Ahead.stop``), also once its list is done, so
that its process id names it for as long as a worker may stop it. Frameworks that build in
the background themselves (Framework.warm) are left out.
"""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import time

from typing import TYPE_CHECKING

import torch

from harness import registry

if TYPE_CHECKING:   # the runner imports this module (paused)
    from harness.run.runner import CaseSpec, Settings


class Ahead:
    """The side processes, one per framework; ``pids`` for the workers' ``paused``."""

    def __init__(self, cases: list[CaseSpec], device: torch.device, settings: Settings):
        ctx = mp.get_context("spawn")
        by_impl: dict[str, list] = {}
        for case in cases:
            by_impl.setdefault(case.impl, []).append(case)
        self.procs, self._conns = [], []
        for impl, mine in by_impl.items():
            conn, child = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(child, mine, str(device), settings), daemon=True,
                               name=f"harness-ahead-{impl}")
            proc.start()
            child.close()
            self.procs.append(proc)
            self._conns.append(conn)
        self.pids = tuple(p.pid for p in self.procs)

    def stop(self) -> None:
        """Kill them (once: an id may name another process after)."""
        for proc in self.procs:
            if proc.exitcode is None:
                proc.kill()
                proc.join(timeout=10)


def start(cases: list[CaseSpec], device: torch.device, settings: Settings, skip: set[str]) -> Ahead | None:
    """The side processes for ``cases`` less the impls in ``skip``, one per impl (a framework's
    imports and compiles then wait for no other's: Liger's import alone took 15 s); None off a
    GPU (the CPU's cores are the cases' own) or where nothing is left."""
    left = [c for c in cases if not c.skip_reason and c.impl not in skip]
    if device.type != "cuda" or not left:
        return None
    return Ahead(left, device, settings)


@contextlib.contextmanager
def paused(pids: tuple[int, ...]):
    """The side processes ``pids`` stopped for the block (none: nothing to stop)."""
    stopped = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
        except OSError:   # gone (killed with the run): nothing to stop
            pass
    for pid in stopped:
        _until_stopped(pid)
    try:
        yield
    finally:
        for pid in stopped:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)


def _until_stopped(pid: int, limit_s: float = 1.0) -> None:
    """Return once ``pid`` is stopped: a signal is delivered when the process is next
    scheduled, not when it is sent (Linux's /proc; elsewhere at once)."""
    stat = f"/proc/{pid}/stat"
    deadline = time.monotonic() + limit_s
    while os.path.exists(stat) and time.monotonic() < deadline:
        with open(stat) as f:
            if f.read().rsplit(")", 1)[1].split()[0] in "TtZX":   # stopped, or dead and not yet reaped
                return
        time.sleep(0.0002)


def _serve(conn, cases: list[CaseSpec], device: str, settings: Settings) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the run's to handle; it ends this process
    _die_with_parent()
    # Inductor compiles in this process: a pool of a process per core in each side process
    # would fight the worker and the other frameworks' compiles for the cores.
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)   # the worker says what fails; this process's words would be twice
    from harness.run.runner import start_frameworks
    dev = torch.device(device)
    try:
        frameworks, ops = start_frameworks(dev, settings)
        stream = torch.cuda.Stream(dev)
    except Exception:  # noqa: BLE001 - nothing ahead: the worker compiles as it goes
        frameworks = None
    if frameworks is not None:
        with torch.cuda.stream(stream):
            for spec in cases:
                compile_case(spec, ops, settings, dev)
    with contextlib.suppress(EOFError, OSError):
        conn.recv()   # until the run ends this process


def compile_case(spec: CaseSpec, ops: dict, settings: Settings, device: torch.device) -> None:
    """The binds and launches of ``spec``'s checks (every input set, then the batch sizes of
    the batch-invariance check on the first), errors ignored."""
    from harness.measure import checks, integrity
    from harness.run.runner import DTYPES
    try:
        key = (spec.op, spec.impl, spec.variant)
        if key not in registry.registered():
            registry.load_impls(spec.op, [spec.impl])
        bind = registry.registered()[key].bind
        op = ops[spec.op](**spec.params)
        dtype = DTYPES[spec.dtype]
    except Exception:  # noqa: BLE001
        return
    for i, case in enumerate(["random", *op.adversarial]):
        try:
            inputs = op.inputs(spec.shape, dtype, device, settings.base_seed + i, case)
            out = integrity.guarded(op.make_output(inputs))
            bind(**inputs, out=out)()
            if i == 0 and op.row_op and settings.batch_invariance:
                checks.batch_invariance(op, bind, inputs, out, out, checks.batch_sizes(out.shape[0]))
            torch.cuda.synchronize(device)
        except Exception:  # noqa: BLE001 - the worker's checks meet it and say what it is
            pass
        finally:
            inputs = out = None
    torch.cuda.empty_cache()   # its memory back to the worker's cases


def _die_with_parent() -> None:
    """Linux: this process is killed when the run's process dies, however it dies."""
    with contextlib.suppress(Exception):
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
