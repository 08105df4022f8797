"""The row kernels' configs (rows.cuh), chosen through harness.tuner's row search.

A config is (``group``: threads per row, a power of two from 1 to MAX_THREADS; ``packs``: 16-byte
packs each thread keeps in registers, 0 to read the row again from L2 for each pass;
``threads``: per block, so a block holds threads / group rows). Only ``group`` decides a row's
bits (rows.cuh), so packs and threads are bit-neutral, and the tuner checks that by digest; the
bits are chosen once per (op, variant, row length, dtype), whatever the batch."""
from __future__ import annotations

import torch

from harness import tuner
from impls._frameworks._launch import configured
from impls._frameworks.cupy import interop, kernels
from impls._frameworks.cupy.launch import fingerprint, i32, i64, raw_launcher

NEUTRAL = ("packs", "threads")
KEPT = (1, 2, 4, 8)                         # packs a thread may keep (rows.cuh's instantiations)
MAX_THREADS = 512                           # rows.cuh's ROW_BOUNDS: threads a block, so a group at most
MAX_LOOPED = 64                             # packs a thread reads in turn, past which a larger group serves


def configs(cols: int, itemsize: int, kept: bool = True, looped: bool = True) -> list[dict]:
    """Every group size with work for most of its threads: the row kept in registers where
    KEPT·group packs cover it (``kept``), and read again (``looped``) where a thread reads at
    most MAX_LOOPED packs (or the group is the largest). A block has max(group, 256) threads."""
    packs = -(-cols // (16 // itemsize))
    out = []
    group = 1
    while group <= MAX_THREADS and (group == 1 or group // 2 < packs):
        per_thread = -(-packs // group)
        threads = max(group, 256)
        keep = next((k for k in KEPT if k >= per_thread), None)
        if kept and keep is not None:
            out.append(dict(group=group, packs=keep, threads=threads))
        if looped and (per_thread <= MAX_LOOPED or group == MAX_THREADS) and (not kept or keep is None or per_thread >= 4):
            out.append(dict(group=group, packs=0, threads=threads))
        group *= 2
    return out


def expressions(kernel: str, dtype, packs: tuple[int, ...], extra: str = "") -> dict[int, str]:
    """The template names of ``kernel`` for each packs value (``extra``: its further arguments)."""
    tail = f", {extra}" if extra else ""
    return {k: f"{kernel}<{kernels.TYPES[dtype]}, {k}{tail}>" for k in packs}


def row_launcher(key: tuple, label: str, kernel: str, inputs: tuple, scalars: tuple, weights: int,
                 kept: bool = True, looped: bool = True, extra: str = ""):
    """The tuned launcher of ``kernel`` (rows.cuh) over ``inputs`` (x, the per-column weights,
    the other row operands, the output last), called as kernel(inputs..., rows, cols, vec,
    group, *scalars). Every instantiation it may use is compiled here, before any timing."""
    x = inputs[0]
    rows, cols = x.shape
    space = configs(cols, x.element_size(), kept, looped)
    if not space:
        raise ValueError(f"CuPy {label}: no config holds a row of {cols} elements")
    names = expressions(kernel, x.dtype, tuple(sorted({c["packs"] for c in space})), extra)
    compiled = kernels.functions("rows.cuh", list(names.values()))

    def bind(config, args, n_rows):
        arrays = interop.views(*args)
        vec = int(interop.aligned(*args, cols=cols))
        per_block = config["threads"] // config["group"]
        grid = -(-n_rows // per_block)
        call = (*arrays, i64(n_rows), i64(cols), i32(vec), i32(config["group"]), *scalars)
        return raw_launcher(compiled[names[config["packs"]]], grid, config["threads"], call, vec=bool(vec))

    row_operands = len(inputs) - 2 - weights

    def scratch(n_rows):
        rowwise = [torch.randn(n_rows, cols, device=x.device).to(x.dtype) for _ in range(1 + row_operands)]
        per_column = [(1 + 0.1 * torch.randn(cols, device=x.device)).to(x.dtype) for _ in range(weights)]
        return (rowwise[0], *per_column, *rowwise[1:], torch.empty(n_rows, cols, device=x.device, dtype=x.dtype))

    full_key = ("cupy", *key, cols, str(x.dtype))
    row_space = tuner.RowSpace(label=f"CuPy {label} for {cols}-column rows ({str(x.dtype).replace('torch.', '')})",
                               cols=cols, shapes=space, scratch=scratch, bind=bind, row_bytes=cols * x.element_size(),
                               neutral=NEUTRAL, fingerprint=fingerprint(space), device=x.device)
    config, table = tuner.for_batch(tuner.tune_rows(full_key, row_space), full_key, rows, row_space)
    launch = bind(config, inputs, rows)
    return configured(launch, {**config, **launch.grid}, table)
