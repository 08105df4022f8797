"""Numba RMSNorm: y = x · rsqrt(mean(x²) + eps) · g; 2·R·H·s + H·s bytes. A group of threads
per row (several rows a block when short; rows.py), UNROLL loads in flight per thread, the
sum of squares in fp32, the row kept in shared memory for its second pass where it fits
(x read once), else read again (from L2). The group is tuned per row length and dtype."""
import numpy as np
from numba import cuda, float32

from harness.registry import impl
from impls._frameworks.numba.device import group_sum, load, rsqrt, store
from impls._frameworks._launch import scratch
from impls._frameworks.numba.rows import UNROLL, grid, row_launcher, shared_bytes
from impls._frameworks.numba.runtime import Launch, view


@cuda.jit(device=True)
def row_rstd(x, row, end, cols, eps, group, lane, cache, base, cached):
    """rsqrt(mean(x²) + eps) of the row (every thread of its group gets it); the row into
    cache[base:base + cols] as fp32 when ``cached``."""
    values = cuda.local.array(UNROLL, float32)
    squares = float32(0)
    c = lane
    while c < end:
        for u in range(UNROLL):
            cc = c + u * group
            values[u] = load(x, (row, cc)) if cc < end else float32(0)
        for u in range(UNROLL):
            squares += values[u] * values[u]
            if cached and c + u * group < end:
                cache[base + c + u * group] = values[u]
        c += UNROLL * group
    total = group_sum(squares, group)
    return rsqrt(total / float32(cols) + eps)


@cuda.jit(cache=True)
def _rmsnorm(x, weight, y, rows, cols, eps, group, cached):
    cache = cuda.shared.array(0, float32)
    tid = cuda.threadIdx.x
    lane, slot = tid % group, tid // group
    row = cuda.blockIdx.x * (cuda.blockDim.x // group) + slot
    end = cols if row < rows else 0      # a row past the batch still joins the block's reductions
    base = slot * cols
    rstd = row_rstd(x, row, end, cols, eps, group, lane, cache, base, cached)
    values = cuda.local.array(UNROLL, float32)
    c = lane
    while c < end:
        for u in range(UNROLL):
            cc = c + u * group
            if cc < end:
                values[u] = cache[base + cc] if cached else load(x, (row, cc))
        for u in range(UNROLL):
            cc = c + u * group
            if cc < end:
                store(y, (row, cc), values[u] * rstd * load(weight, cc))
        c += UNROLL * group


def launcher(x, weight, eps, y, config, rows):
    cols = x.shape[1]
    return Launch(_rmsnorm, grid(config, rows), config["threads"],
                  (view(x), view(weight), view(y), rows, cols, np.float32(eps), config["group"], config["cached"]),
                  shared_bytes(config, cols), device=x.device)


@impl("rmsnorm", "numba")
def bind(x, weight, eps, out):
    def make(config, args, rows):
        xs, w, y = args
        return launcher(xs, w, eps, y, config, rows)
    return row_launcher(("rmsnorm",), "rmsnorm", (x, weight, out), scratch(x.shape[1], x.dtype, x.device, 1, 1), make,
                        cacheable=True)
