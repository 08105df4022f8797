"""Numba RMSNorm: y = x · rsqrt(mean(x²) + eps) · g; 2·R·H·s + H·s bytes. A group of threads
per row (several rows a block when short; rows.py), CHUNKS chunks of 4 columns in flight per
thread as 8-byte words, the sum of squares in fp32, the row kept in shared memory for its
second pass where it fits (x read once), else read again (from L2). Rows are indexed flat
(row · cols + column). The group is tuned per row length and dtype."""
import numpy as np
from numba import cuda, float32

from harness.registry import impl
from impls._frameworks._launch import scratch
from impls._frameworks.numba.device import (CHUNK, cache_get, cache_put, group_sum, row_load, row_store, row_words,
                                            rsqrt)
from impls._frameworks.numba.rows import CHUNKS, UNROLL, grid, row_launcher, shared_bytes
from impls._frameworks.numba.runtime import Launch, word_views


@cuda.jit(device=True)
def row_rstd(x, xw, xp, start, end, cols, eps, group, lane, cache, base, cached):
    """rsqrt(mean(x²) + eps) of the row at flat element ``start`` (every thread of its group
    gets it); the row into its cache slots (device.cache_put) when ``cached``."""
    values = cuda.local.array(UNROLL, float32)
    wide, word = row_words(x, xp, start)
    chunks = (cols + CHUNK - 1) // CHUNK
    squares = float32(0)
    c = lane * CHUNK
    while c < end:
        for u in range(CHUNKS):
            values[4 * u], values[4 * u + 1], values[4 * u + 2], values[4 * u + 3] = row_load(
                x, xw, wide, word, start, c + u * group * CHUNK, end, float32(0))
        for u in range(UNROLL):
            squares += values[u] * values[u]
        if cached:
            for u in range(CHUNKS):
                cache_put(cache, base, chunks, c + u * group * CHUNK, end, values[4 * u], values[4 * u + 1],
                          values[4 * u + 2], values[4 * u + 3])
        c += CHUNKS * group * CHUNK
    total = group_sum(squares, group)
    return rsqrt(total / float32(cols) + eps)


@cuda.jit(cache=True)
def _rmsnorm(x, xw, xp, weight, ww, wp, y, yw, yp, rows, cols, eps, group, cached):
    cache = cuda.shared.array(0, float32)
    tid = cuda.threadIdx.x
    lane, slot = tid % group, tid // group
    row = cuda.blockIdx.x * (cuda.blockDim.x // group) + slot
    end = cols if row < rows else 0      # a row past the batch still joins the block's reductions
    start = row * cols
    chunks = (cols + CHUNK - 1) // CHUNK
    base = slot * chunks * CHUNK
    rstd = row_rstd(x, xw, xp, start, end, cols, eps, group, lane, cache, base, cached)
    x_wide, x_word = row_words(x, xp, start)
    y_wide, y_word = row_words(y, yp, start)
    w_wide, w_word = row_words(weight, wp, 0)
    values = cuda.local.array(UNROLL, float32)
    c = lane * CHUNK
    while c < end:
        for u in range(CHUNKS):
            cu = c + u * group * CHUNK
            if cached:
                v = cache_get(cache, base, chunks, cu, end, float32(0))
            else:
                v = row_load(x, xw, x_wide, x_word, start, cu, end, float32(0))
            values[4 * u], values[4 * u + 1], values[4 * u + 2], values[4 * u + 3] = v
        for u in range(CHUNKS):
            cu = c + u * group * CHUNK
            g0, g1, g2, g3 = row_load(weight, ww, w_wide, w_word, 0, cu, end, float32(0))
            row_store(y, yw, y_wide, y_word, start, cu, end, values[4 * u] * rstd * g0,
                      values[4 * u + 1] * rstd * g1, values[4 * u + 2] * rstd * g2, values[4 * u + 3] * rstd * g3)
        c += CHUNKS * group * CHUNK


def launcher(x, weight, eps, y, config, rows):
    cols = x.shape[1]
    return Launch(_rmsnorm, grid(config, rows), config["threads"],
                  (*word_views(x, weight, y), rows, cols, np.float32(eps), config["group"], config["cached"]),
                  shared_bytes(config, cols), device=x.device)


@impl("rmsnorm", "numba")
def bind(x, weight, eps, out):
    def make(config, args, rows):
        xs, w, y = args
        return launcher(xs, w, eps, y, config, rows)
    return row_launcher(("rmsnorm",), "rmsnorm", (x, weight, out), scratch(x.shape[1], x.dtype, x.device, 1, 1), make,
                        cacheable=True)
