"""Numba RMSNorm: y = x · rsqrt(mean(x²) + eps) · g; 2·R·H·s + H·s bytes. A group of threads
per row (several rows a block when short; rows.py), four 16-byte chunks in flight per thread
(rowchunks), the sum of squares in fp32. x is read once where one step of the group
covers the row (its values stay in registers) or where the row fits in shared memory (kept
there for the second pass), else read again (from L2). Rows are indexed flat (row · cols +
column). The group is tuned per row length and dtype."""
import numpy as np
from numba import cuda, float32, uint32

from harness.registry import impl
from impls._frameworks._launch import scratch
from impls._frameworks.numba.device import group_sum, inlined, rsqrt
from impls._frameworks.numba.rowchunks import (cache_base, cache_step, chunk_into, kept, load_step, step_values, put_chunk,
                                               row_of, row_words, step_of, width)
from impls._frameworks.numba.rows import CHUNKS, MAX_CHUNK, STEP_MAX, grid, row_launcher, shared_bytes, whole
from impls._frameworks.numba.runtime import Launch, word_views


@inlined
def row_rstd(values, x, xw, x_wide, x_word, start, n, chunks, cols, eps, group, lane, cache, base, cached, whole):
    """rsqrt(mean(x²) + eps) of the row at flat element ``start`` (every thread of its group
    gets it); the row into its cache (rowchunks.cache_put) when ``cached``. Where one step
    covers the row (rowchunks.kept), ``values`` holds this thread's chunks after it."""
    squares = float32(0)
    in_registers = kept(x, chunks, group)
    k = lane
    while k < chunks:
        load_step(values, x, xw, x_wide, x_word, start, k, group, n, float32(0), cache, base, chunks, False, whole)
        for u in range(step_values(x)):
            squares += values[u] * values[u]
        if cached and not in_registers:
            cache_step(values, x, cache, base, chunks, k, group, n, whole)
        k = uint32(k + step_of(x, group))
    total = group_sum(squares, group)
    return rsqrt(total / float32(cols) + eps)


@inlined
def _rmsnorm(x, xw, xp, weight, ww, wp, y, yw, yp, rows, cols, eps, group, cached, whole):
    cache = cuda.shared.array(0, float32)
    values = cuda.local.array(STEP_MAX, float32)
    gains = cuda.local.array(MAX_CHUNK, float32)
    out = cuda.local.array(MAX_CHUNK, float32)
    lane, slot, n, start, chunks = row_of(x, group, rows, cols)
    base = cache_base(x, cache, slot, chunks)
    x_wide, x_word = row_words(x, xp, start)
    rstd = row_rstd(values, x, xw, x_wide, x_word, start, n, chunks, cols, eps, group, lane, cache, base, cached, whole)
    y_wide, y_word = row_words(y, yp, start)
    w_wide, w_word = row_words(weight, wp, 0)
    in_registers = kept(x, chunks, group)
    span = width(x)
    k = lane
    while k < chunks:
        if not in_registers:
            load_step(values, x, xw, x_wide, x_word, start, k, group, n, float32(0), cache, base, chunks, cached, whole)
        for u in range(CHUNKS):
            ku = uint32(k + uint32(u * group))
            chunk_into(gains, 0, weight, ww, w_wide, w_word, 0, ku, n, float32(0), whole)
            for t in range(span):
                out[t] = values[u * span + t] * rstd * gains[t]
            put_chunk(y, yw, y_wide, y_word, start, ku, n, out, whole)
        k = uint32(k + step_of(x, group))


# Two kernels over one body: rows of whole, 16-byte aligned chunks (rows.whole) and any rows.
@cuda.jit(cache=True)
def _rmsnorm_whole(x, xw, xp, weight, ww, wp, y, yw, yp, rows, cols, eps, group, cached):
    _rmsnorm(x, xw, xp, weight, ww, wp, y, yw, yp, rows, cols, eps, group, cached, True)


@cuda.jit(cache=True)
def _rmsnorm_any(x, xw, xp, weight, ww, wp, y, yw, yp, rows, cols, eps, group, cached):
    _rmsnorm(x, xw, xp, weight, ww, wp, y, yw, yp, rows, cols, eps, group, cached, False)


def launcher(x, weight, eps, y, config, rows):
    cols = x.shape[1]
    kernel = _rmsnorm_whole if whole((x, weight, y), cols) else _rmsnorm_any
    return Launch(kernel, grid(config, rows), config["threads"],
                  (*word_views(x, weight, y), rows, cols, np.float32(eps), config["group"], config["cached"]),
                  shared_bytes(config, cols), device=x.device)


@impl("rmsnorm", "numba")
def bind(x, weight, eps, out):
    def make(config, args, rows):
        xs, w, y = args
        return launcher(xs, w, eps, y, config, rows)
    return row_launcher(("rmsnorm",), "rmsnorm", (x, weight, out), scratch(x.shape[1], x.dtype, x.device, 1, 1), make,
                        cacheable=True)
