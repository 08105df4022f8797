"""The raw variants' row kernels: the CUDA extension's (rows.cuh and each op's header, compiled
by kernels.py), with the CUDA framework's configs and checks (cuda/rows.py), the config
for CuPy's own build, on the current PyTorch stream.

A row kernel is named by a template with ``{T}`` (the storage type), ``{P}`` (the packs a thread
keeps, 0 to read the row again), ``{TRIP}`` (the packs a looped row reads a trip, 0 for a kept
row: cuda/rows.py's trip_of) and ``{W}`` (whole rows: host.cuh's whole_rows), e.g.
``hk::softmax_rows<{T}, {P}, {TRIP}, hk::ONLINE, {W}>``, and called as host.cuh's launchers call it:
(the operands' pointers, int64_t rows, int cols, the op's floats, int group)."""
from __future__ import annotations

import torch

from impls._frameworks._launch import configured, scratch
from impls._frameworks.cuda import rows as cuda_rows
from impls._frameworks.cupy import interop, kernels, launch


def whole(tensors: tuple, cols: int) -> bool:
    """host.cuh's whole_rows: cols a multiple of a pack and every base pointer 16-byte aligned."""
    return cols % (16 // tensors[0].element_size()) == 0 and all(t.data_ptr() % 16 == 0 for t in tensors)


def expression(template: str, dtype: torch.dtype, config: dict, whole_rows: bool) -> str:
    return template.format(T=kernels.TYPES[dtype], P=config["packs"], TRIP=cuda_rows.trip_of(config),
                           W="true" if whole_rows else "false")


def kernel_of(config: dict, whole_rows: bool) -> tuple:
    """What picks a config's kernel: (packs, trip, whole rows)."""
    return config["packs"], cuda_rows.trip_of(config), whole_rows


def row_launcher(op: str, key: tuple, label: str, template: str, inputs: tuple, scalars: tuple, weights: int,
                 kept: bool = True, looped: bool = True):
    """The tuned launcher of ``template`` (``op``'s header) over ``inputs`` (x, the ``weights``
    per-column operands, the other row operands, the output last), with ``scalars`` (numpy.float32)
    after rows and cols. Every instantiation of the template for this dtype is compiled here,
    before any timing, as one module whatever the row length (every kept packs and looped trip,
    both layouts): one NVRTC run per template and dtype serves every shape of a run, where one
    per row length took 2.5x the time (rmsnorm bf16, four row lengths: 2.9 s against 1.2 s of
    NVRTC on a CPU)."""
    x = inputs[0]
    n_rows, cols = x.shape
    if not cuda_rows.configs(cols, x.element_size(), kept, looped):
        raise ValueError(f"CuPy {label}: no config holds a row of {cols} elements")
    shapes = [{"packs": packs, "trip": trip} for packs, trip in cuda_rows.kernel_shapes(kept, looped)]
    names = {kernel_of(c, w): expression(template, x.dtype, c, w) for c in shapes for w in (True, False)}
    compiled = kernels.functions(op, sorted(set(names.values())))

    def bind(config, args, batch_rows):
        cuda_rows.check(batch_rows, cols, config, x.element_size(), f"CuPy {label}")
        w = whole(args, cols)
        per_block = config["threads"] // config["group"]
        call = (*interop.views(*args), launch.i64(batch_rows), launch.i32(cols), *scalars,
                launch.i32(config["group"]))
        return launch.raw_launcher(compiled[names[kernel_of(config, w)]], -(-batch_rows // per_block),
                                   config["threads"], call, whole=w)

    row_operands = len(inputs) - 2 - weights
    problems = scratch(cols, x.dtype, x.device, 1 + row_operands, weights)
    config = cuda_rows.choose_for("cupy", "CuPy", launch.unrunnable(), key, label, cols, x.dtype, x.device, n_rows,
                                  problems, bind, kept, looped)
    launcher = bind(cuda_rows.without_source(config), inputs, n_rows)
    return configured(launcher, {**config, **launcher.grid})
