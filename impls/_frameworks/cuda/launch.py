"""Launching the CUDA kernels: grids, the tuned 1-D launchers, scratch for reductions.

A config is (threads per block, blocks per SM); ``per_sm`` 0 means enough blocks for one pass
over the data (no grid-stride loop). The kernels are compiled once for every config (they take
the config as launch parameters), so trying a config costs a timing, not a build."""
from harness import tuner
from impls._frameworks._launch import configured
from impls._frameworks.cuda import build

UNROLL = 4          # packs in flight per thread (elementwise.cuh, reduce_1d.cuh)
NAIVE_THREADS = 256

# 1024 or 2048 resident threads per SM (the H100/H200 hold 2048), or one pass over the data.
CANDIDATES = [dict(threads=t, per_sm=p) for t, p in ((256, 4), (256, 8), (512, 2), (512, 4), (1024, 1), (1024, 2),
                                                     (256, 0), (512, 0))]


def sm_count(device) -> int:
    import torch
    return torch.cuda.get_device_properties(device).multi_processor_count


def blocks_for(n: int, itemsize: int, config: dict, device) -> int:
    """Blocks for ``n`` elements of ``itemsize`` bytes: each thread takes UNROLL 16-byte packs
    a step; capped at ``per_sm`` blocks per SM unless per_sm is 0."""
    per_thread = UNROLL * (16 // itemsize)
    cover = max(1, -(-n // (config["threads"] * per_thread)))
    return cover if config["per_sm"] == 0 else min(cover, config["per_sm"] * sm_count(device))


def fingerprint(space: list[dict]) -> dict:
    return {"kernel": build.build_hash(), "space": space, "arch": build.arch()}


def tuned(key, label: str, make, device, candidates: list[dict] = CANDIDATES):
    """The launcher ``make(config)`` builds for the config the tuner finds fastest for ``key``
    (kept on disk per build hash and GPU), with the config and its table attached. ``key``
    starts with "cuda": the tuner keeps a process's choices by key, and another framework's
    kernel of the same op and size must not take this one's config."""
    choice = tuner.tune(key, candidates, make, f"CUDA {label}", fingerprint(candidates), device)
    launch = make(choice.config)
    return configured(launch, {**choice.config, **getattr(launch, "grid", {})}, choice.table)


def with_grid(launch, **grid):
    """A launcher carrying the grid it resolved (blocks), for the record's config."""
    launch.grid = grid
    return launch
