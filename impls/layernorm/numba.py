"""Numba LayerNorm: a group of threads per row (several rows a block when short; rows.py),
four 16-byte chunks in flight per thread (rowchunks), rows indexed flat,
statistics in fp32, the row kept in shared memory for its later passes where it fits (x
read once), else read again (from L2); 2·R·H·s + 2·H·s bytes.
  welford:  each step's values (up to rowchunks.step_values) as one (count, mean, M2) state, merged into
            the thread's running state, the states merged across the group (Chan et al.): one pass for
            the statistics, one division per step, not per element.
  two_pass: the mean, then sum((x - mean)²).
  unsafe:   E[x²] - E[x]² in one pass: the negative control the large_mean inputs must fail.
  naive:    one block of 256 threads a row, a column at a time (naive.py), the mean, then
            sum((x - mean)²): the first kernel, to show the gap.
The group (and so the bits) of the others comes from the GPU's table or the rule."""
import numpy as np
from numba import cuda, float32, int64, uint32

from harness.registry import impl
from impls._frameworks.numba.device import load, store
from impls._frameworks.numba.groups import group_sum, group_welford, welford_merge
from impls._frameworks.numba.naive import BLOCK, block_per_row
from impls._frameworks.numba.primitives import inlined, rsqrt
from impls._frameworks.numba.rowchunks import (CACHED, KEPT, cache_step, chunk_words, in_row, load_step, put_chunk,
                                               refetch_step, row_setup, row_words, step_of, step_value, step_values,
                                               value_of, width)
from impls._frameworks._launch import scratch
from impls._frameworks.numba.rows import (CHUNKS, KEEPS, MAX_CHUNK, STEP_MAX, STEP_WORDS, launch,
                                          row_launcher)

WELFORD, TWO_PASS, UNSAFE = 0, 1, 2
VARIANTS = {"welford": WELFORD, "two_pass": TWO_PASS, "unsafe": UNSAFE}


@inlined
def _layernorm(x, xw, xp, weight, ww, wp, bias, bw, bp, y, yw, yp, rows, cols, eps, group, kind, algorithm, whole):
    cache = cuda.shared.array(0, float32)
    words = cuda.local.array(STEP_WORDS, uint32)
    values = cuda.local.array(STEP_MAX, float32)
    gains = cuda.local.array(4, uint32)
    shifts = cuda.local.array(4, uint32)
    out = cuda.local.array(MAX_CHUNK, float32)
    lane, n, start, chunks, base, x_wide, x_word = row_setup(x, xp, cache, group, rows, cols)
    span = width(x)
    n_, mean, m2 = float32(0), float32(0), float32(0)     # unsafe: -, sum, sum of squares
    k = lane
    while k < chunks:
        load_step(words, x, xw, x_wide, x_word, start, k, group, n, float32(0), whole)
        step_sum = float32(0)
        for u in range(step_values(x)):
            values[u] = value_of(x, words, u)
            step_sum += values[u]
        if kind == CACHED:
            cache_step(values, x, cache, base, chunks, k, group, n, whole)
        if algorithm == WELFORD:
            count = 0
            for u in range(CHUNKS):
                count += max(0, min(span, int64(n) - int64(span) * int64(k + u * group)))
            step_mean = step_sum / float32(max(count, 1))     # no columns (a kept row's idle lane): merged as none
            step_m2 = float32(0)
            for u in range(step_values(x)):   # all of them, masked: a constant trip count keeps values in registers
                if in_row(x, k, u // span, group, u % span, n, whole):
                    deviation = values[u] - step_mean
                    step_m2 += deviation * deviation
            n_, mean, m2 = welford_merge(n_, mean, m2, float32(count), step_mean, step_m2)
        elif algorithm == UNSAFE:
            mean += step_sum
            for u in range(step_values(x)):
                m2 += values[u] * values[u]
        else:
            mean += step_sum
        if kind == KEPT:
            break                     # one step covers the row
        k = uint32(k + step_of(x, group))
    if algorithm == WELFORD:
        n_, mean, m2 = group_welford(n_, mean, m2, group)
        variance = m2 / float32(cols)
    elif algorithm == UNSAFE:
        mean = group_sum(mean, group) / float32(cols)
        variance = group_sum(m2, group) / float32(cols) - mean * mean
    else:
        mean = group_sum(mean, group) / float32(cols)
        squares = float32(0)
        k = lane
        while k < chunks:
            refetch_step(kind, words, values, x, xw, x_wide, x_word, start, cache, base, chunks, k, group, n,
                         float32(0), whole)
            for u in range(step_values(x)):
                if in_row(x, k, u // span, group, u % span, n, whole):
                    deviation = step_value(x, words, values, u, kind == CACHED) - mean
                    squares += deviation * deviation
            if kind == KEPT:
                break
            k = uint32(k + step_of(x, group))
        variance = group_sum(squares, group) / float32(cols)
    rstd = rsqrt(variance + eps)
    # welford's kept row: the first pass's fp32 values (its step statistics hold them all live
    # there anyway), not the words beside them: 64 registers in bf16 on sm_90, not 70. The
    # same values: a conversion is exact.
    fp32_kept = kind == KEPT and algorithm == WELFORD
    y_wide, y_word = row_words(y, yp, start)
    w_wide, w_word = row_words(weight, wp, 0)
    b_wide, b_word = row_words(bias, bp, 0)
    k = lane
    while k < chunks:
        refetch_step(kind, words, values, x, xw, x_wide, x_word, start, cache, base, chunks, k, group, n, float32(0),
                     whole)
        for u in range(CHUNKS):
            ku = uint32(k + uint32(u * group))
            chunk_words(gains, 0, weight, ww, w_wide, w_word, 0, ku, n, float32(0), whole)
            chunk_words(shifts, 0, bias, bw, b_wide, b_word, 0, ku, n, float32(0), whole)
            for t in range(span):
                v = step_value(x, words, values, u * span + t, kind == CACHED or fp32_kept)
                out[t] = (v - mean) * rstd * value_of(weight, gains, t) + value_of(bias, shifts, t)
            put_chunk(y, yw, y_wide, y_word, start, ku, n, out, whole)
        if kind == KEPT:
            break
        k = uint32(k + step_of(x, group))


# One kernel per variant, row shape (rows.whole: whole, 16-byte aligned chunks, or any rows)
# and keep (rows.keep), all constants of its code.
def _kernel(algorithm, whole_rows, kind):
    def kernel(x, xw, xp, weight, ww, wp, bias, bw, bp, y, yw, yp, rows, cols, eps, group):
        _layernorm(x, xw, xp, weight, ww, wp, bias, bw, bp, y, yw, yp, rows, cols, eps, group, kind, algorithm,
                   whole_rows)
    kernel.__name__ = kernel.__qualname__ = f"_{NAMES[algorithm]}{'_whole' if whole_rows else ''}_{KEEPS[kind]}"
    return cuda.jit(cache=True)(kernel)


NAMES = {v: k for k, v in VARIANTS.items()}
KERNELS = {(algorithm, w, kind): _kernel(algorithm, w, kind) for algorithm in NAMES for w in (True, False)
           for kind in KEEPS}


def _register(variant: str, algorithm: int):
    @impl("layernorm", "numba", variant=variant)
    def bind(x, weight, bias, eps, out):
        cols = x.shape[1]

        def make(config, args, rows):
            return launch(KERNELS, (algorithm,), config, args, rows, (np.float32(eps),), f"Numba layernorm {variant}")
        return row_launcher(("layernorm", variant), f"layernorm {variant}", (x, weight, bias, out),
                            scratch(cols, x.dtype, x.device, 1, 2), make, cacheable=True)
    return bind


for _variant, _algorithm in VARIANTS.items():
    _register(_variant, _algorithm)


@cuda.jit(cache=True)
def _naive(x, weight, bias, y, cols, eps):
    """Row blockIdx: each thread adds its columns, the block sums them (the mean), then the same
    for the squared deviations (the variance), then each thread normalises its columns."""
    start = cuda.blockIdx.x * cols
    total = float32(0)
    for j in range(cuda.threadIdx.x, cols, BLOCK):
        total += load(x, start + j)
    mean = group_sum(total, BLOCK) / float32(cols)
    squares = float32(0)
    for j in range(cuda.threadIdx.x, cols, BLOCK):
        deviation = load(x, start + j) - mean
        squares += deviation * deviation
    rstd = rsqrt(group_sum(squares, BLOCK) / float32(cols) + eps)
    for j in range(cuda.threadIdx.x, cols, BLOCK):
        store(y, start + j, (load(x, start + j) - mean) * rstd * load(weight, j) + load(bias, j))


@impl("layernorm", "numba", variant="naive")
def bind_naive(x, weight, bias, eps, out):
    return block_per_row(_naive, (x, weight, bias, out), (np.float32(eps),))
