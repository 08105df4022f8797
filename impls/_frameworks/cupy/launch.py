"""Launching the raw variants' 1-D kernels (the CUDA extension's elementwise.cuh and
reduce_1d.cuh, compiled by kernels.py) with the CUDA framework's grids (cuda/launch.py), the
config tuned for CuPy's own build, on the current PyTorch stream.

Each launcher passes exactly the arguments its kernel declares, host.cuh's launchers being the
model: pointers as the tensors' CuPy views, ``int64_t`` as numpy.int64, ``int`` as numpy.int32,
``float`` as numpy.float32, and a functor by value as the bytes of its members (copy's empty
Identity: one byte; scale's Times: its float). tests/test_cupy.py checks each against the
kernel's signature as NVRTC compiles it."""
from __future__ import annotations

import numpy as np
import torch

from impls._frameworks import _launch
from impls._frameworks._launch import CANDIDATES
from impls._frameworks.cuda.launch import blocks_for
from impls._frameworks.cupy import interop, kernels

FINISH_THREADS = 1024   # reduce_1d.cuh's FINISH_THREADS: reduce_finish's one block


def unrunnable() -> tuple:
    """A config the driver refuses (none here should be: the CUDA framework's spaces fit the
    kernels' bounds): the tuner skips it."""
    import cupy
    return (cupy.cuda.driver.CUDADriverError,)


def chosen(kernel: str, n: int, dtype, make, device, rule: dict = _launch.RULE):
    """_launch.chosen for CuPy's build of the kernels (``kernel`` without "cupy")."""
    return _launch.chosen(f"cupy {kernel}", n, dtype, make, device, CANDIDATES, rule, unrunnable=unrunnable())


def raw_launcher(kernel, grid: int, block: int, args: tuple, **grid_info):
    """A launcher of a compiled kernel on the stream current when it is called, its grid attached."""
    if not 1 <= grid <= 2 ** 31 - 1:
        raise ValueError(f"a grid of {grid} blocks cannot launch (1 to 2^31 - 1)")

    def launch():
        kernel((grid,), (block,), args, stream=interop.stream())
    launch.grid = {"blocks": grid, **grid_info}
    return launch


def i64(v: int):
    return np.int64(v)


def i32(v: int):
    if not -2 ** 31 <= v < 2 ** 31:
        raise ValueError(f"{v} does not fit the kernel's 32-bit int")
    return np.int32(v)


def f32(v: float):
    return np.float32(v)


def head_elements(t: torch.Tensor) -> int:
    """host.cuh's head_elements: t's elements before its first 16-byte boundary."""
    misalign = t.data_ptr() % 16
    return min(0 if misalign == 0 else (16 - misalign) // t.element_size(), t.numel())


def pack_size(dtype: torch.dtype) -> int:
    return 16 // dtype.itemsize


# --- elementwise.cuh (host.cuh's launch_elementwise) --------------------------------------------

def elementwise(op: str, functor: str, functor_bytes, x: torch.Tensor, out: torch.Tensor):
    """The tuned launcher of ``op``'s elementwise kernel with ``functor`` (a C++ type of hk,
    passed by value as ``functor_bytes``): the vector kernel where x and out are as far from a
    16-byte boundary (their packs line up), else the scalar one."""
    n = x.numel()   # 0 launches one block that does nothing, where host.cuh launches none
    vector = x.data_ptr() % 16 == out.data_ptr() % 16
    kind = "vector" if vector else "scalar"
    name = f"hk::elementwise_{kind}<{kernels.TYPES[x.dtype]}, hk::ELEMENTWISE_UNROLL, hk::{functor}>"
    kernel = kernels.functions(op, [name])[name]
    xs, ys = interop.views(x, out)
    if vector:
        head = head_elements(x)
        shape = (i64(head), i64((n - head) // pack_size(x.dtype)), i64(n))
    else:
        shape = (i64(n),)

    def make(config):
        blocks = blocks_for(n, x.element_size(), config, x.device)
        return raw_launcher(kernel, blocks, config["threads"], (xs, ys, *shape, functor_bytes), path=kind)
    return chosen(f"{op} tuned {kind}", n, x.dtype, make, x.device)


# --- reduce_1d.cuh (host.cuh's launch_reduce_1d) ------------------------------------------------

REDUCTIONS = {"sum": ("hk::Add", "hk::AtomicAdd"), "max": ("hk::MaxNan", "hk::AtomicMaxNan")}


def reduce_1d(op: str, variant: str, x: torch.Tensor, out: torch.Tensor):
    """The tuned launcher of ``op``'s (sum, max) 1-D reduction: two_pass, a partial per block
    then reduce_finish in one block; atomic, one launch combining into an accumulator and a
    ticket counter that every launch leaves zeroed (so two launches of one binding must not
    overlap: they run in stream order). Scratch is allocated here, per config."""
    combine, atomic_combine = REDUCTIONS[op]
    n, atomic = x.numel(), variant == "atomic"
    if n == 0:
        raise ValueError(f"CuPy {op}: x is empty")
    if out.dtype != torch.float32 or out.numel() != 1:
        raise ValueError(f"CuPy {op}: out must be one float32, got {out.dtype} of {out.numel()} elements")
    t = kernels.TYPES[x.dtype]
    first = (f"hk::reduce_atomic<{t}, {combine}, {atomic_combine}>" if atomic
             else f"hk::reduce_partials<{t}, {combine}>")
    finish = f"hk::reduce_finish<{combine}>"
    compiled = kernels.functions(op, [first] if atomic else [first, finish])
    xs, ys = interop.views(x, out)
    head = head_elements(x)
    shape = (i64(head), i64((n - head) // pack_size(x.dtype)), i64(n))

    def make(config):
        threads, blocks = config["threads"], blocks_for(n, x.element_size(), config, x.device)
        scratch = torch.zeros(2 if atomic else blocks, dtype=torch.float32, device=x.device)
        work = interop.view(scratch)
        if atomic:   # the accumulator, then the ticket counter (an unsigned in the kernel)
            launch = raw_launcher(compiled[first], blocks, threads, (xs, *shape, work, work[1:], ys))
        else:
            partials = raw_launcher(compiled[first], blocks, threads, (xs, *shape, work))
            total = raw_launcher(compiled[finish], 1, FINISH_THREADS, (work, i64(blocks), ys))

            def launch():
                partials()
                total()
        launch.scratch = scratch   # alive as long as the launcher
        launch.grid = {"blocks": blocks}
        return launch
    return chosen(f"{op} {variant}", n, x.dtype, make, x.device, _launch.REDUCTION_RULE)
