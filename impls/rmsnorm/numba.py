"""Numba RMSNorm: y = x · rsqrt(mean(x²) + eps) · g; 2·R·H·s + H·s bytes. A group of threads
per row (several rows a block when short; rows.py), four 16-byte chunks in flight per thread
(rowchunks), the sum of squares in fp32. x is read once where one step of the group
covers the row (its values stay in registers) or where the row fits in shared memory (kept
there for the second pass), else read again (from L2). Rows are indexed flat (row · cols +
column). The group is tuned per row length and dtype.
  naive: one block of 256 threads a row, a column at a time (naive.py): the first kernel, to show the gap."""
import numpy as np
from numba import cuda, float32, uint32

from harness.registry import impl
from impls._frameworks._launch import scratch
from impls._frameworks.numba.device import load, store
from impls._frameworks.numba.groups import group_sum
from impls._frameworks.numba.naive import BLOCK, block_per_row
from impls._frameworks.numba.primitives import inlined, rsqrt
from impls._frameworks.numba.rowchunks import (CACHED, KEPT, cache_step, chunk_words, load_step, put_chunk,
                                               refetch_step, row_setup, row_words, step_of, step_value, step_values,
                                               value_of, width)
from impls._frameworks.numba.rows import (CHUNKS, MAX_CHUNK, STEP_MAX, KEEPS, STEP_WORDS, launch,
                                          row_launcher)


@inlined
def row_rstd(words, values, x, xw, x_wide, x_word, start, n, chunks, cols, eps, group, lane, cache, base, kind, whole):
    """rsqrt(mean(x²) + eps) of the row at flat element ``start`` (every thread of its group
    gets it); the row into its cache (rowchunks.cache_put) when ``kind`` is CACHED. When KEPT,
    ``words`` holds this thread's chunks after it."""
    squares = float32(0)
    k = lane
    while k < chunks:
        load_step(words, x, xw, x_wide, x_word, start, k, group, n, float32(0), whole)
        for u in range(step_values(x)):
            v = value_of(x, words, u)
            values[u] = v
            squares += v * v
        if kind == CACHED:
            cache_step(values, x, cache, base, chunks, k, group, n, whole)
        if kind == KEPT:
            break                     # one step covers the row
        k = uint32(k + step_of(x, group))
    total = group_sum(squares, group)
    return rsqrt(total / float32(cols) + eps)


@inlined
def _rmsnorm(x, xw, xp, weight, ww, wp, y, yw, yp, rows, cols, eps, group, kind, whole):
    cache = cuda.shared.array(0, float32)
    words = cuda.local.array(STEP_WORDS, uint32)
    values = cuda.local.array(STEP_MAX, float32)
    gains = cuda.local.array(4, uint32)
    out = cuda.local.array(MAX_CHUNK, float32)
    lane, n, start, chunks, base, x_wide, x_word = row_setup(x, xp, cache, group, rows, cols)
    rstd = row_rstd(words, values, x, xw, x_wide, x_word, start, n, chunks, cols, eps, group, lane, cache, base, kind,
                    whole)
    y_wide, y_word = row_words(y, yp, start)
    w_wide, w_word = row_words(weight, wp, 0)
    span = width(x)
    k = lane
    while k < chunks:
        refetch_step(kind, words, values, x, xw, x_wide, x_word, start, cache, base, chunks, k, group, n, float32(0),
                     whole)
        for u in range(CHUNKS):
            ku = uint32(k + uint32(u * group))
            chunk_words(gains, 0, weight, ww, w_wide, w_word, 0, ku, n, float32(0), whole)
            for t in range(span):
                out[t] = step_value(x, words, values, u * span + t, kind == CACHED) * rstd * value_of(weight, gains, t)
            put_chunk(y, yw, y_wide, y_word, start, ku, n, out, whole)
        if kind == KEPT:
            break
        k = uint32(k + step_of(x, group))


# One kernel per row shape (rows.whole: whole, 16-byte aligned chunks, or any rows) and keep
# (rows.keep), constants of its code, over one body.
def _kernel(whole_rows, kind):
    def kernel(x, xw, xp, weight, ww, wp, y, yw, yp, rows, cols, eps, group):
        _rmsnorm(x, xw, xp, weight, ww, wp, y, yw, yp, rows, cols, eps, group, kind, whole_rows)
    kernel.__name__ = kernel.__qualname__ = f"_rmsnorm{'_whole' if whole_rows else ''}_{KEEPS[kind]}"
    return cuda.jit(cache=True)(kernel)


KERNELS = {(w, kind): _kernel(w, kind) for w in (True, False) for kind in KEEPS}


@impl("rmsnorm", "numba", variant="tuned")
def bind(x, weight, eps, out):
    def make(config, args, rows):
        return launch(KERNELS, (), config, args, rows, (np.float32(eps),), "Numba rmsnorm")
    return row_launcher(("rmsnorm", "tuned"), "rmsnorm tuned", (x, weight, out), scratch(x.shape[1], x.dtype, x.device, 1, 1), make,
                        cacheable=True)


@cuda.jit(cache=True)
def _naive(x, weight, y, cols, eps):
    """Row blockIdx: each thread adds the squares of its columns, the block sums them, then each
    thread scales its columns."""
    start = cuda.blockIdx.x * cols
    squares = float32(0)
    for j in range(cuda.threadIdx.x, cols, BLOCK):
        v = load(x, start + j)
        squares += v * v
    rstd = rsqrt(group_sum(squares, BLOCK) / float32(cols) + eps)
    for j in range(cuda.threadIdx.x, cols, BLOCK):
        store(y, start + j, load(x, start + j) * rstd * load(weight, j))


@impl("rmsnorm", "numba", variant="naive")
def bind_naive(x, weight, eps, out):
    return block_per_row(_naive, (x, weight, out), (np.float32(eps),))
