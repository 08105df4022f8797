"""Numba LayerNorm: a group of threads per row (several rows a block when short; rows.py),
CHUNKS chunks of 4 columns in flight per thread as 8-byte words, rows indexed flat,
statistics in fp32, the row kept in shared memory for its later passes where it fits (x
read once), else read again (from L2); 2·R·H·s + 2·H·s bytes.
  welford:  each step's (up to) UNROLL values as one (count, mean, M2) state, merged into
            the thread's running state, the states merged across the group (Chan et al.): one pass for
            the statistics, one division per step, not per element.
  two_pass: the mean, then sum((x - mean)²).
  naive:    E[x²] - E[x]² in one pass: the negative control the large_mean inputs must fail.
The group (and so the bits) is tuned per row length and dtype."""
import numpy as np
from numba import cuda, float32

from harness.registry import impl
from impls._frameworks.numba.device import (CHUNK, cache_get, cache_put, group_sum, group_welford, inlined, row_load,
                                            row_store, row_words, rsqrt, welford_merge)
from impls._frameworks._launch import scratch
from impls._frameworks.numba.rows import CHUNKS, UNROLL, grid, row_launcher, shared_bytes
from impls._frameworks.numba.runtime import Launch, word_views

WELFORD, TWO_PASS, NAIVE = 0, 1, 2
VARIANTS = {"welford": WELFORD, "two_pass": TWO_PASS, "naive": NAIVE}


@inlined
def _layernorm(x, xw, xp, weight, ww, wp, bias, bw, bp, y, yw, yp, rows, cols, eps, group, cached, algorithm):
    cache = cuda.shared.array(0, float32)
    values = cuda.local.array(UNROLL, float32)
    tid = cuda.threadIdx.x
    lane, slot = tid % group, tid // group
    row = cuda.blockIdx.x * (cuda.blockDim.x // group) + slot
    end = cols if row < rows else 0      # a row past the batch still joins the block's reductions
    start = row * cols
    chunks = (cols + CHUNK - 1) // CHUNK
    base = slot * chunks * CHUNK
    x_wide, x_word = row_words(x, xp, start)
    n, mean, m2 = float32(0), float32(0), float32(0)     # naive: n, sum, sum of squares
    c = lane * CHUNK
    while c < end:
        count = 0
        for u in range(CHUNKS):
            cu = c + u * group * CHUNK
            values[4 * u], values[4 * u + 1], values[4 * u + 2], values[4 * u + 3] = row_load(
                x, xw, x_wide, x_word, start, cu, end, float32(0))
            count += max(0, min(CHUNK, end - cu))
        step_sum = float32(0)
        for u in range(UNROLL):
            step_sum += values[u]
        if cached:
            for u in range(CHUNKS):
                cache_put(cache, base, chunks, c + u * group * CHUNK, end, values[4 * u], values[4 * u + 1],
                          values[4 * u + 2], values[4 * u + 3])
        if algorithm == WELFORD:
            step_mean = step_sum / float32(count)
            step_m2 = float32(0)
            for u in range(UNROLL):   # all UNROLL, masked: a constant trip count keeps values in registers
                if c + (u // CHUNK) * group * CHUNK + u % CHUNK < end:
                    deviation = values[u] - step_mean
                    step_m2 += deviation * deviation
            n, mean, m2 = welford_merge(n, mean, m2, float32(count), step_mean, step_m2)
        elif algorithm == NAIVE:
            mean += step_sum
            for u in range(UNROLL):
                m2 += values[u] * values[u]
        else:
            mean += step_sum
        c += CHUNKS * group * CHUNK
    if algorithm == WELFORD:
        n, mean, m2 = group_welford(n, mean, m2, group)
        variance = m2 / float32(cols)
    elif algorithm == NAIVE:
        mean = group_sum(mean, group) / float32(cols)
        variance = group_sum(m2, group) / float32(cols) - mean * mean
    else:
        mean = group_sum(mean, group) / float32(cols)
        squares = float32(0)
        c = lane * CHUNK
        while c < end:
            for u in range(CHUNKS):
                cu = c + u * group * CHUNK
                if cached:
                    v = cache_get(cache, base, chunks, cu, end, float32(0))
                else:
                    v = row_load(x, xw, x_wide, x_word, start, cu, end, float32(0))
                values[4 * u], values[4 * u + 1], values[4 * u + 2], values[4 * u + 3] = v
            for u in range(UNROLL):
                if c + (u // CHUNK) * group * CHUNK + u % CHUNK < end:
                    deviation = values[u] - mean
                    squares += deviation * deviation
            c += CHUNKS * group * CHUNK
        variance = group_sum(squares, group) / float32(cols)
    rstd = rsqrt(variance + eps)
    y_wide, y_word = row_words(y, yp, start)
    w_wide, w_word = row_words(weight, wp, 0)
    b_wide, b_word = row_words(bias, bp, 0)
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
            b0, b1, b2, b3 = row_load(bias, bw, b_wide, b_word, 0, cu, end, float32(0))
            i = 4 * u
            row_store(y, yw, y_wide, y_word, start, cu, end, (values[i] - mean) * rstd * g0 + b0,
                      (values[i + 1] - mean) * rstd * g1 + b1, (values[i + 2] - mean) * rstd * g2 + b2,
                      (values[i + 3] - mean) * rstd * g3 + b3)
        c += CHUNKS * group * CHUNK


# One kernel per variant, its algorithm a constant of its code.
@cuda.jit(cache=True)
def _welford(x, xw, xp, weight, ww, wp, bias, bw, bp, y, yw, yp, rows, cols, eps, group, cached):
    _layernorm(x, xw, xp, weight, ww, wp, bias, bw, bp, y, yw, yp, rows, cols, eps, group, cached, WELFORD)


@cuda.jit(cache=True)
def _two_pass(x, xw, xp, weight, ww, wp, bias, bw, bp, y, yw, yp, rows, cols, eps, group, cached):
    _layernorm(x, xw, xp, weight, ww, wp, bias, bw, bp, y, yw, yp, rows, cols, eps, group, cached, TWO_PASS)


@cuda.jit(cache=True)
def _naive(x, xw, xp, weight, ww, wp, bias, bw, bp, y, yw, yp, rows, cols, eps, group, cached):
    _layernorm(x, xw, xp, weight, ww, wp, bias, bw, bp, y, yw, yp, rows, cols, eps, group, cached, NAIVE)


KERNELS = {WELFORD: _welford, TWO_PASS: _two_pass, NAIVE: _naive}


def _register(variant: str, algorithm: int):
    @impl("layernorm", "numba", variant=variant)
    def bind(x, weight, bias, eps, out):
        cols = x.shape[1]

        def make(config, args, rows):
            return Launch(KERNELS[algorithm], grid(config, rows), config["threads"],
                          (*word_views(*args), rows, cols, np.float32(eps), config["group"], config["cached"]),
                          shared_bytes(config, cols), device=x.device)
        return row_launcher(("layernorm", variant), f"layernorm {variant}", (x, weight, bias, out),
                            scratch(cols, x.dtype, x.device, 1, 2), make, cacheable=True)
    return bind


for _variant, _algorithm in VARIANTS.items():
    _register(_variant, _algorithm)
