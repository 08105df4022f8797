"""Building a tuner's Triton candidates in a pool of processes, so that timing them finds
each binary built.

Triton compiles a kernel in the calling process and holds the interpreter lock through its
front end (the kernel's AST to IR: about a fifth of a row kernel's compile on sm_90), so
threads of one process overlap little; processes do. The harness's own process opens the
pool's socket when the run is planned (Triton.warm), before any case, and keeps it for the
whole run; the process that runs the cases (harness.worker) sends it each tuning step's
builds over it and waits for them, then launches: Triton's dispatch there finds each
binary in its on-disk cache (TRITON_CACHE_DIR, the same for every process of the run).
The processes, each importing torch and Triton (a burst on every core beside the first
cases), start with the socket where the run will tune (Triton.warm says when), else at the
first build asked for: a run that finds every choice kept never starts them.

A build is the kernel's own ``warmup`` with the launch's arguments, each tensor stood in for
by its dtype and its address, for the launching process's GPU target: Triton specialises a
pointer on its dtype and whether its address is a multiple of 16, an integer on its value
(1, a multiple of 16, or neither; not RMSNorm's row kernel's row and program counts:
rows.BATCH_ARGS), and keys the binary on the target, so the pool's build
has the launch's cache key; a launch whose key differs compiles in its own process, as it
would without the pool. The pool's processes never touch the GPU: they are given the target
(a driver that knows only that: _TargetOnly), so they hold no CUDA context. A build that
fails in the pool is reported with its candidate named and left to its own launch, which
compiles it again and says why it cannot run (the tuner then skips that candidate and
times the rest).

``HARNESS_TRITON_COMPILE`` (the run's ``triton_compile``) picks how candidates are built
before they are timed: ``processes`` (this pool), ``threads`` (in the case's own process,
Triton's AsyncCompileMode), ``serial`` (none beforehand: each compiles at its first launch).
"""
from __future__ import annotations

import atexit
import importlib
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from harness import settings
from impls._frameworks._launch import builds_at_once

MODES = ("processes", "threads", "serial")
ADDRESS = "HARNESS_TRITON_POOL"   # the pool's socket, for the processes the run starts after it
COMPILE_LOG = "HARNESS_TRITON_COMPILE_LOG"   # a file: a JSON line per Triton compile or cache hit, any process
BUILD_TIMEOUT_S = 600.0   # a pool build that takes longer is left to its launch
RESTARTS = 3         # a pool whose process died (a compiler crash) is replaced this many times


def mode() -> str:
    return settings.choice("HARNESS_TRITON_COMPILE", MODES)


def say(text: str) -> None:
    print(f"harness: triton: {text}", file=sys.stderr, flush=True)


def log_compiles(role: str) -> None:
    """Where HARNESS_TRITON_COMPILE_LOG names a file, append to it a JSON line for every
    kernel this process asks Triton to compile: {pid, role (``pool`` or ``case``), kernel,
    cache_hit (found built in Triton's on-disk cache), us}: which process built what."""
    path = os.environ.get(COMPILE_LOG)
    if not path:
        return
    import json

    from triton import knobs

    def listen(*, src, metadata, metadata_group, times, cache_hit):
        line = {"pid": os.getpid(), "role": role, "kernel": getattr(src, "name", None), "cache_hit": bool(cache_hit),
                "us": getattr(times, "total", None)}
        with open(path, "a") as f:   # one short write per line: lines of several processes do not mix
            f.write(json.dumps(line) + "\n")
    knobs.compilation.listener = listen


# --- what travels to the pool -----------------------------------------------------------

@dataclass(frozen=True)
class Pointer:
    """A tensor argument as Triton specialises it: its dtype's name and its address."""
    dtype: str
    address: int


@dataclass(frozen=True)
class Job:
    """One build: ``module``.``name`` is the kernel (a module-level @triton.jit), the rest
    the launch's arguments with tensors as Pointers; ``candidate`` names it in reports."""
    module: str
    name: str
    args: tuple
    kwargs: dict
    grid: tuple
    candidate: str
    target: object = None   # Triton's GPUTarget of the launching process; None: the pool process's own GPU


def portable(value):
    """A launch argument as it travels: a tensor (anything with a dtype and a data_ptr) as a
    Pointer, the rest as it is."""
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        return Pointer(str(value.dtype).rsplit(".", 1)[-1], int(value.data_ptr()))
    return value


def job(kernel, call, candidate: str, target=None) -> Job:
    """The Job of ``kernel`` launched as ``call`` = (args, kwargs, grid) on ``target``."""
    args, kwargs, grid = call
    fn = getattr(kernel, "fn", kernel)
    return Job(fn.__module__, fn.__qualname__, tuple(portable(a) for a in args),
               {k: portable(v) for k, v in kwargs.items()}, tuple(grid), candidate, target)


def current_target():
    """The GPU target Triton compiles for in this process, or None where it cannot say."""
    try:
        from triton.runtime.driver import driver
        return driver.active.get_current_target()
    except Exception:  # noqa: BLE001 - no GPU driver here: the pool's processes use their own
        return None


class _StandIn:
    """What a pool process passes Triton for a tensor: the two things it specialises on."""

    def __init__(self, pointer: Pointer):
        import torch
        self.dtype = getattr(torch, pointer.dtype)
        self._address = pointer.address

    def data_ptr(self) -> int:
        return self._address


def _real(value):
    return _StandIn(value) if isinstance(value, Pointer) else value


# --- in a pool process ---------------------------------------------------------------------

class _TargetOnly:
    """Triton's driver as a build needs it (Triton's JIT asks it for the device, its stream
    and the target, then compiles for that target): the targets the jobs name, one device
    number each; no CUDA call, so no context on the GPU that cases are timed on."""

    def __init__(self):
        self.targets: list = []
        self.device = 0

    def use(self, target) -> None:
        if target not in self.targets:
            self.targets.append(target)
        self.device = self.targets.index(target)

    def get_current_target(self):
        return self.targets[self.device]

    def get_current_device(self) -> int:
        return self.device

    def get_current_stream(self, device=None) -> int:
        return 0


_driver: _TargetOnly | None = None


def _for_target(target) -> None:
    global _driver
    if target is None:
        return
    if _driver is None:
        from triton.runtime.driver import driver
        _driver = _TargetOnly()
        driver.set_active(_driver)
    _driver.use(target)

def _watch_parent(parent: int) -> None:
    """Leave when the harness does: a pool process outliving it (killed) would wait forever."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def _start_worker(parent: int, modules: tuple) -> None:
    # A SIGINT to the harness's process group (Ctrl-C, a sweep's `timeout --signal=INT`) is the
    # harness's to handle: it records what it measured and stops the pool (stop()); a pool
    # process dying of it would look like a broken pool and be started again as the run ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    try:
        log_compiles("pool")
    except ImportError:
        pass
    for name in modules:   # the kernels' modules, imported once now rather than at the first build
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a build of its kernel will say why
            pass


def _ready() -> int:
    return os.getpid()


def build_one(j: Job) -> tuple:
    """("ok", seconds) or ("error", kind, message): kind ``compile`` where the candidate does
    not build (Triton's compile error), ``pool`` where the pool could not try."""
    started = time.perf_counter()
    try:
        kernel = importlib.import_module(j.module)
        for part in j.name.split("."):
            kernel = getattr(kernel, part)
        args = [_real(a) for a in j.args]
        kwargs = {k: _real(v) for k, v in j.kwargs.items()}
        _for_target(j.target)
    except Exception as e:  # noqa: BLE001
        return ("error", "pool", f"{j.module}.{j.name} not found in a pool process: {type(e).__name__}: {e}")
    try:
        kernel.warmup(*args, grid=j.grid, **kwargs)
    except Exception as e:  # noqa: BLE001
        from impls._frameworks.triton.launch import unrunnable
        try:
            kind = "compile" if isinstance(e, unrunnable()) else "pool"
        except ImportError:
            kind = "pool"
        return ("error", kind, reason(e))
    return ("ok", round(time.perf_counter() - started, 4))


def reason(e: BaseException) -> str:
    """What went wrong, in a line or two: Triton wraps the error of a failed compile in one
    CompilationError per calling function, each quoting its source; the innermost says why."""
    root = e
    while root.__cause__ is not None:
        root = root.__cause__
    if root is e:
        return f"{type(e).__name__}: {e}"
    return f"{type(e).__name__}: {type(root).__name__}: {root}"


# --- in the harness's process: the pool and its socket ----------------------------------

class Pool:
    """The build processes and the socket the run's processes reach them by. ``eager``:
    the processes start now; else at the first build asked for (a run whose choices are all
    kept never starts them)."""

    def __init__(self, modules: tuple = (), n: int | None = None, eager: bool = True):
        from multiprocessing.connection import Listener
        self.modules, self.n = tuple(modules), n or builds_at_once()
        self.broken: str | None = None
        self.restarts = 0
        self.closed = False
        self._lock = threading.Lock()
        self.executor: ProcessPoolExecutor | None = None
        # The socket first: a failure to open it then leaves no processes behind.
        self.folder = tempfile.mkdtemp(prefix="harness-triton-pool-")
        self.listener = Listener(os.path.join(self.folder, "socket"), "AF_UNIX", authkey=mp.current_process().authkey)
        self.address = self.listener.address
        try:
            self.executor = self._executor() if eager else None
        except Exception:
            self.close()
            raise
        threading.Thread(target=self._accept, daemon=True, name="triton-pool").start()

    def _executor(self) -> ProcessPoolExecutor:
        executor = ProcessPoolExecutor(self.n, mp_context=mp.get_context("spawn"), initializer=_start_worker,
                                       initargs=(os.getpid(), self.modules))
        for _ in range(self.n):   # start every process now: each imports torch and Triton once
            executor.submit(_ready)
        return executor

    def _accept(self) -> None:
        while True:
            try:
                conn = self.listener.accept()
            except OSError:
                return   # closed
            except Exception:  # noqa: BLE001 - a client that failed to authenticate
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn) -> None:
        """Answer each request of one case's process. Every request gets an answer, since its
        process waits for one: a request that cannot be read gets None (that process then
        builds its candidates itself), a failure of the pool's own an error for each job."""
        with conn:
            while True:
                try:
                    jobs = conn.recv()
                except (EOFError, OSError):
                    return   # the case's process is gone (killed, timed out): nothing to answer
                except Exception as e:  # noqa: BLE001 - a request that does not unpickle here
                    say(f"the compile pool could not read a request ({type(e).__name__}: {e})")
                    jobs, results = None, None
                if jobs is not None:
                    try:
                        results = self.build(jobs)
                    except Exception as e:  # noqa: BLE001 - the pool's own failure, said per job
                        results = [("error", "pool", f"the compile pool failed: {type(e).__name__}: {e}")] * len(jobs)
                try:
                    conn.send(results)
                except (EOFError, OSError):
                    return

    def build(self, jobs: list[Job]) -> list[tuple] | None:
        """Each job's result, in order; a job the pool could not run is a ``pool`` error.
        None once the pool has broken for good (RESTARTS, or its processes could not start)
        or closed."""
        with self._lock:
            if self.broken or self.closed:
                return None   # the client builds them itself
            if self.executor is None:
                try:
                    self.executor = self._executor()
                except Exception as e:  # noqa: BLE001 - no processes here: the client builds them
                    self.broken = (f"the compile pool's processes did not start ({type(e).__name__}: {e}); "
                                   "candidates compile where they launch")
                    say(self.broken)
                    return None
            executor = self.executor
        try:
            futures = [executor.submit(build_one, j) for j in jobs]
        except (BrokenProcessPool, RuntimeError) as e:
            self._replace(executor, e)
            return [("error", "pool", f"the compile pool broke: {type(e).__name__}: {e}")] * len(jobs)
        done, _ = wait(futures, timeout=BUILD_TIMEOUT_S)
        results = []
        for f in futures:
            if f not in done:
                f.cancel()   # not started yet: leave the processes to the next request
                results.append(("error", "pool", f"not built within {BUILD_TIMEOUT_S:.0f} s"))
                continue
            try:
                results.append(f.result())
            except BrokenProcessPool as e:
                self._replace(executor, e)
                results.append(("error", "pool", f"a compile process died: {e}"))
            except Exception as e:  # noqa: BLE001 - unpicklable arguments, and the like
                results.append(("error", "pool", f"{type(e).__name__}: {e}"))
        return results

    def _replace(self, executor, error) -> None:
        with self._lock:
            if self.executor is not executor:
                return   # replaced already
            executor.shutdown(wait=False, cancel_futures=True)
            if self.restarts >= RESTARTS:
                self.broken = (f"the compile pool broke {self.restarts + 1} times ({type(error).__name__}: {error}); "
                               "candidates compile where they launch")
                say(self.broken)
                return
            self.restarts += 1
            self.executor = self._executor()

    def close(self) -> None:
        try:
            self.listener.close()
        except OSError:
            pass
        with self._lock:
            executor, self.executor = self.executor, None
            self.closed = True   # a build asked for from now on starts no processes
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
            for p in list((getattr(executor, "_processes", None) or {}).values()):
                p.kill()   # a build in flight: the run is over, nothing waits for it
        try:
            os.unlink(self.address)
            os.rmdir(self.folder)
        except OSError:
            pass


_pool: Pool | None = None


def start(modules=(), n: int | None = None, eager: bool = True) -> bool:
    """Start the pool (once per process) and tell the processes started after it where it
    is (ADDRESS); False, with the reason said, where processes cannot start here. Not
    ``eager``: only its socket now, its processes at the first build asked of it."""
    global _pool
    if _pool is not None:
        return True
    try:
        _pool = Pool(modules, n, eager)
    except Exception as e:  # noqa: BLE001 - no processes, no socket: the cases build in their process
        say(f"the compile pool did not start ({type(e).__name__}: {e}); candidates compile in the cases' "
            "process, in threads")
        return False
    os.environ[ADDRESS] = _pool.address
    # Before concurrent.futures' own exit hook, which would wait for every build in flight
    # (a hung compiler: forever): the run is over, stop() kills them.
    threading._register_atexit(stop)
    atexit.register(stop)
    return True


def stop() -> None:
    global _pool
    if _pool is not None:
        _pool.close()
        _pool = None
        os.environ.pop(ADDRESS, None)


# --- in the process that runs the cases: the client ---------------------------------------

class _Client:
    conn = None
    unusable: str | None = None
    lock = threading.Lock()


def _connect():
    """The connection to the run's pool, made once per process; None, with the reason said
    once, where there is none."""
    if _Client.conn is not None or _Client.unusable:
        return _Client.conn
    address = os.environ.get(ADDRESS)
    if not address:
        _Client.unusable = (f"no compile pool in this process's run ({ADDRESS} unset: a harness run on a GPU "
                            "starts it); candidates compile here, in threads")
    else:
        from multiprocessing.connection import Client
        try:
            _Client.conn = Client(address, "AF_UNIX", authkey=mp.current_process().authkey)
        except Exception as e:  # noqa: BLE001
            _Client.unusable = (f"the compile pool at {address} did not answer ({type(e).__name__}: {e}); "
                                "candidates compile here, in threads")
    if _Client.unusable:
        say(_Client.unusable)
    return _Client.conn


def build(jobs: list[Job]) -> list[tuple] | None:
    """Each job's result from the run's pool; None where there is no pool to ask (the
    reason said once): the caller builds them itself."""
    import pickle
    results: list = [None] * len(jobs)
    sent = []
    for i, j in enumerate(jobs):   # a job that cannot travel is reported, the others still go
        try:
            pickle.dumps(j)
            sent.append(i)
        except Exception as e:  # noqa: BLE001
            results[i] = ("error", "pool", f"not sent to the pool: {type(e).__name__}: {e}")
    with _Client.lock:
        conn = _connect()
        if conn is None:
            return None
        try:
            conn.send([jobs[i] for i in sent])
            answers = conn.recv()
        except (EOFError, OSError) as e:
            _Client.conn, _Client.unusable = None, f"the compile pool went away ({type(e).__name__}: {e})"
            say(_Client.unusable + "; candidates compile here, in threads")
            return None
        if answers is None:
            _Client.unusable = ("the compile pool broke for good (its reason is above); candidates compile here, "
                                "in threads")
            say(_Client.unusable)
            return None
    for i, answer in zip(sent, answers):
        results[i] = answer
    return results


def forget_connection() -> None:
    """Drop this process's connection and its reason (tests)."""
    with _Client.lock:
        if _Client.conn is not None:
            _Client.conn.close()
        _Client.conn, _Client.unusable = None, None
