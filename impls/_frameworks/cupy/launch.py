"""Launching the raw 1-D kernels (elementwise.cuh, reduce_1d.cuh): grids, the tuned configs.

A config is (threads per block, blocks per SM); ``per_sm`` 0 means enough blocks for one pass
over the data (no grid-stride loop). The kernels take the config at launch, so trying one
costs a timing, not a compile. Every launcher reads the current PyTorch stream when called."""
from __future__ import annotations

import numpy as np
import torch

from harness import tuner
from impls._frameworks._launch import configured
from impls._frameworks.cupy import interop, kernels

UNROLL = 4   # common.cuh: packs in flight per thread
CANDIDATES = [dict(threads=t, per_sm=p) for t, p in ((256, 4), (256, 8), (512, 2), (512, 4), (1024, 1), (1024, 2),
                                                     (256, 0), (512, 0))]


def sm_count(device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def blocks_for(n: int, itemsize: int, config: dict, device) -> int:
    """Blocks for ``n`` elements: each thread takes UNROLL 16-byte packs a step; capped at
    ``per_sm`` blocks per SM unless per_sm is 0."""
    per_thread = UNROLL * (16 // itemsize)
    cover = max(1, -(-n // (config["threads"] * per_thread)))
    return cover if config["per_sm"] == 0 else min(cover, config["per_sm"] * sm_count(device))


def fingerprint(space: list[dict]) -> dict:
    import cupy
    return {"kernel": kernels.source_hash(), "space": space, "cupy": cupy.__version__}


def tuned(key: tuple, label: str, make, device, candidates: list[dict] = CANDIDATES):
    """The launcher ``make(config)`` builds for the config the tuner finds fastest for ``key``
    (which starts with "cupy": another framework's kernel of the same op and size must not
    take this one's config), with the config and the tuner's table attached."""
    choice = tuner.tune(key, candidates, make, f"CuPy {label}", fingerprint(candidates), device)
    launch = make(choice.config)
    return configured(launch, {**choice.config, **getattr(launch, "grid", {})}, choice.table)


def raw_launcher(kernel, grid: int, block: int, args: tuple, **grid_info):
    """A launcher of a compiled kernel on the current PyTorch stream, its grid attached."""
    def launch():
        kernel((grid,), (block,), args, stream=interop.stream())
    launch.grid = {"blocks": grid, **grid_info}
    return launch


def i64(v: int):
    return np.int64(v)


def f32(v: float):
    return np.float32(v)


def i32(v: int):
    return np.int32(v)


# --- the 1-D kernels' launchers ---------------------------------------------------------

ELEMENTWISE = {"copy": 0, "scale": 1, "silu": 2, "mul": 3, "add": 4}   # elementwise.cuh's Elementwise


def elementwise(op: str, a: torch.Tensor, out: torch.Tensor, b: torch.Tensor | None = None, scale: float = 0.0):
    """The tuned launcher of elementwise.cuh's ``op``: out = op(a[, b])."""
    n = a.numel()
    kernel = kernels.function("elementwise.cuh", f"elementwise<{kernels.TYPES[a.dtype]}, {ELEMENTWISE[op]}>")
    args = interop.views(a, b if b is not None else a, out)
    vec = interop.aligned(a, out, *(() if b is None else (b,)))

    def make(config):
        blocks = blocks_for(n, a.element_size(), config, a.device)
        return raw_launcher(kernel, blocks, config["threads"], (*args, i64(n), f32(scale), i32(int(vec))),
                            vec=vec)
    return tuned(("cupy", "elementwise", op, a.dtype, n, vec), f"{op} {a.dtype} {n}", make, a.device)


def reduce_1d(kind: str, variant: str, x: torch.Tensor, out: torch.Tensor):
    """The tuned launcher of reduce_1d.cuh for ``kind`` (sum, max) and ``variant`` (two_pass:
    partials, then reduce_partials in one block; atomic: one launch). Scratch is allocated
    here, per config: partials, or the accumulator and ticket every launch leaves zeroed (so
    two launches of one binding must not overlap: they run in stream order)."""
    n, is_max, atomic = x.numel(), "true" if kind == "max" else "false", variant == "atomic"
    first = kernels.function("reduce_1d.cuh", f"reduce_1d<{kernels.TYPES[x.dtype]}, {is_max}, "
                                               f"{'true' if atomic else 'false'}>")
    second = None if atomic else kernels.function("reduce_1d.cuh", f"reduce_partials<{is_max}>")
    xs, ys = interop.views(x, out)
    vec = interop.aligned(x)

    def make(config):
        threads, blocks = config["threads"], blocks_for(n, x.element_size(), config, x.device)
        scratch = torch.zeros(2 if atomic else blocks, dtype=torch.float32, device=x.device)
        partials = interop.view(scratch)
        pass_one = raw_launcher(first, blocks, threads, (xs, i64(n), i32(int(vec)), partials, ys))
        if atomic:
            launch = pass_one
        else:
            pass_two = raw_launcher(second, 1, 1024, (partials, i32(blocks), ys))

            def launch():
                pass_one()
                pass_two()
        launch.scratch = scratch   # alive as long as the launcher
        launch.grid = {"blocks": blocks, "vec": vec}
        return launch
    return tuned(("cupy", kind, variant, x.dtype, n, vec), f"{kind} {variant} {x.dtype} {n}", make, x.device)
