"""Launching Triton kernels: a launcher per config with its arguments worked out once,
parallel builds of the configs harness-tune is about to time, and Triton's errors for a
config that cannot run."""
import inspect
import os

from impls._frameworks._launch import configured  # noqa: F401  (the impls take configured from here)

# The most builds at once in threads (build_all): a tuning step builds up to ~20 candidates,
# so more would mostly wait; fewer where this process may run on fewer cores (its CPU
# affinity: a container's, Slurm's or taskset's share, which os.cpu_count does not see).
MAX_BUILDS = 16


def builds_at_once() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:   # no affinity on this platform
        cores = os.cpu_count() or 1
    return max(1, min(MAX_BUILDS, cores))

# Cache hints for data that is read once and written once. Whether they help is measured,
# not assumed (on the H200 a copy with evict_first loads ran at 92% of torch's copy_, a
# plain one at ~100%): the tuned kernels try both, as the constexprs LOAD and STORE.
HINTS = {"plain": {"LOAD": "", "STORE": ""},
         "stream": {"LOAD": "evict_first", "STORE": ".cs"}}


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def sm_count(device) -> int:
    import torch
    if getattr(device, "type", "cpu") != "cuda":
        return 4     # the interpreter: a few programs exercise the grid-stride loops
    return torch.cuda.get_device_properties(device).multi_processor_count


def unrunnable() -> tuple:
    """Triton's errors for a config that does not compile or does not fit the GPU: the
    tuner skips such a candidate."""
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources
    return CompilationError, OutOfResources


def kernel_args(kernel, args: tuple, kwargs: dict) -> tuple:
    """Every parameter of ``kernel`` in its signature's order, constexprs included (what a
    compiled Triton kernel's launcher takes): the positional ``args``, then each remaining
    parameter from ``kwargs`` or its default. Options (num_warps) are not parameters."""
    params = inspect.signature(kernel.fn).parameters
    if len(args) > len(params):
        raise TypeError(f"{kernel.fn.__name__} takes {len(params)} arguments, got {len(args)} positional")
    given = {**dict(zip(params, args)), **{k: v for k, v in kwargs.items() if k in params}}
    missing = [n for n, p in params.items() if n not in given and p.default is inspect.Parameter.empty]
    if missing:
        raise TypeError(f"{kernel.fn.__name__}: no value for {', '.join(missing)}")
    return tuple(given.get(n, p.default) for n, p in params.items())


def bound_launch(kernel, grid: tuple, *args, **kwargs):
    """A launcher (no arguments) of ``kernel[grid](*args, **kwargs)``, all of it fixed.
    The first launch goes through Triton's dispatch (it binds and specialises every
    argument, hashes a cache key, compiles on a miss) and keeps the compiled kernel;
    later launches call that kernel's own launcher with the same arguments, on the current
    stream (so that a CUDA graph capture records them): the dispatch is the same work
    every time, and a caller launching a few small batches back to back would wait on it.
    Under the interpreter every launch dispatches."""
    jit = kernel[grid]
    if interpreting():
        return lambda: jit(*args, **kwargs)
    full = kernel_args(kernel, args, kwargs)
    run = None

    def launch():
        nonlocal run
        if run is None:
            compiled = jit(*args, **kwargs)     # compiles, or finds the cached binary, and launches
            run = compiled[(*grid, 1, 1)[:3]]   # its own launcher: takes a 3-D grid, all the parameters
            launch.registers = compiled.n_regs  # per thread, as loaded (the tuning table's regs)
            launch.binary = compiled
            return
        run(*full)
    return launch


def describe(cfg: dict) -> str:
    """A candidate config as a report names it: ``rows=2 num_warps=8 ...``."""
    return " ".join(f"{k}={v}" for k, v in cfg.items())


def build_all(builds) -> None:
    """Compile each (kernel, (args, kwargs, grid), candidate) of ``builds`` before it is
    launched, in threads of this process (harness-tune's build step: a search's candidates
    built side by side, then timed). A candidate that fails to build is left for its own
    launch to report (the search's warnings name those that did not run). Nothing under the
    interpreter."""
    builds = list(builds)
    if not interpreting() and builds:
        _in_threads(builds)


def _in_threads(builds) -> None:
    """Each build at once in threads of this process (Triton's AsyncCompileMode), as many as
    builds_at_once; nothing for a single build, which its launch compiles just as well.
    Triton's compiler holds the interpreter lock through its front end, so threads overlap
    only its passes and ptxas (2 cores: 8 RMSNorm configs for sm_90 in 1.83 s against 2.55
    one after another)."""
    if len(builds) < 2:
        return
    from concurrent.futures import ThreadPoolExecutor
    try:
        from triton.runtime._async_compile import AsyncCompileMode
    except ImportError:   # a Triton without it: each launch builds its own
        return
    with ThreadPoolExecutor(builds_at_once()) as pool, AsyncCompileMode(pool, ignore_errors=True):
        for kernel, (args, kwargs, grid), _ in builds:
            try:
                kernel.warmup(*args, grid=grid, **kwargs)
            except unrunnable():
                pass
