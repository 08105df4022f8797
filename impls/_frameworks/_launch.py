"""What every framework's launchers share: the launch configuration carried on the launcher,
so that each record shows what ran and what the tuner chose it from; the 1-D kernels' config
space, grid and tuning; and the row tuner's scratch problems.

A 1-D config is (threads per block, blocks per SM); ``per_sm`` 0 means enough blocks for one
pass over the data (no grid-stride loop). The kernels take it at launch, so trying a config
costs a timing, not a build."""

import os

# The most builds a framework runs at once, in threads or processes (Triton's candidates:
# launch.build_all, pool.py): a tuning step builds up to ~20 candidates, so more would
# mostly wait; fewer where this process may run on fewer cores (its CPU affinity: a
# container's, Slurm's or taskset's share, which os.cpu_count does not see).
MAX_BUILDS = 16


def builds_at_once() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:   # no affinity on this platform
        cores = os.cpu_count() or 1
    return max(1, min(MAX_BUILDS, cores))


# 1024 or 2048 resident threads per SM (the H100/H200 hold 2048), or one pass over the data.
CANDIDATES = [dict(threads=t, per_sm=p) for t, p in ((256, 4), (256, 8), (512, 2), (512, 4), (1024, 1), (1024, 2),
                                                     (256, 0), (512, 0))]


def configured(launch, config: dict, tuning: dict | None = None):
    """Attach the launch configuration (and the tuner's table) to a launcher: the record
    shows what ran and what it was chosen from."""
    launch.config = dict(config)
    launch.tuning = dict(tuning or {})
    return launch


def sm_count(device) -> int:
    import torch
    return torch.cuda.get_device_properties(device).multi_processor_count


def blocks_for(n: int, per_thread: int, config: dict, sms: int) -> int:
    """Blocks for ``n`` elements when each thread takes ``per_thread`` a step: one pass over
    them, capped at ``per_sm`` blocks on each of ``sms`` SMs unless per_sm is 0."""
    cover = max(1, -(-n // (config["threads"] * per_thread)))
    return cover if config["per_sm"] == 0 else min(cover, config["per_sm"] * sms)


def with_grid(launch, **grid):
    """A launcher carrying the grid it resolved (blocks), for the record's config."""
    launch.grid = grid
    return launch


def tuned(key: tuple, label: str, make, device, fingerprint: dict, candidates: list[dict] = CANDIDATES,
          unrunnable: tuple = ()):
    """The launcher ``make(config)`` builds for the config harness.tuner finds fastest for
    ``key`` (kept on disk with ``fingerprint``: the kernel's source, the space, the versions),
    with the config, its grid and the tuner's table attached. ``key`` starts with the
    framework's name: the tuner keeps a process's choices by key, and another framework's
    kernel of the same op and size must not take this one's config."""
    from harness import tuner
    choice = tuner.tune(key, candidates, make, label, fingerprint, device, unrunnable=unrunnable)
    launch = make(choice.config)
    return configured(launch, {**choice.config, **getattr(launch, "grid", {})}, choice.table)


def scratch(cols: int, dtype, device, row_operands: int, weights: int):
    """scratch(rows) for the tuner: ``row_operands`` random [rows, cols] tensors, ``weights``
    random [cols] ones, then the output: fresh values, never the case's own inputs."""
    import torch

    def make(rows: int) -> tuple:
        rowwise = [torch.randn(rows, cols, device=device).to(dtype) for _ in range(row_operands)]
        per_column = [(1 + 0.1 * torch.randn(cols, device=device)).to(dtype) for _ in range(weights)]
        return (*rowwise[:1], *per_column, *rowwise[1:], torch.empty(rows, cols, device=device, dtype=dtype))
    return make
