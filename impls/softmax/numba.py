"""Numba softmax over the last dim: a group of threads per row (several rows a block when
short; rows.py), CHUNKS chunks of 4 columns in flight per thread as 8-byte words, rows
indexed flat, exp in fp32; 2·R·C·s bytes.
  three_pass: max, sum of exp(x - max), output: x read three times (the later reads mostly
              from L2).
  online:     the (max, sum) pair rescaled as the max grows, merged across the group by the
              same rule (device.online_merge): x read twice.
  on_chip:    the row kept in shared memory as fp32 between its passes: x read once (rows up
              to 48 KiB of fp32 a block; a longer row is an error, as it is no on-chip row).
The group (and so the bits) is tuned per row length and dtype."""
import math

from numba import cuda, float32

from harness.registry import impl
from impls._frameworks.numba.device import (CHUNK, NEG_INF, cache_get, cache_put, group_max, group_online, group_sum,
                                            inlined, max_nan, online_add, row_load, row_store, row_words)
from impls._frameworks._launch import scratch
from impls._frameworks.numba.rows import CHUNKS, UNROLL, grid, row_launcher, shared_bytes
from impls._frameworks.numba.runtime import Launch, word_views

THREE_PASS, ONLINE, ON_CHIP = 0, 1, 2
VARIANTS = {"three_pass": THREE_PASS, "online": ONLINE, "on_chip": ON_CHIP}


@inlined
def _softmax(x, xw, xp, y, yw, yp, rows, cols, group, cached, algorithm):
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
    y_wide, y_word = row_words(y, yp, start)
    # First pass: the max (and, online, the sum of exp(x - max) as the max grows).
    m, d = NEG_INF, float32(0)
    c = lane * CHUNK
    while c < end:
        for u in range(CHUNKS):
            values[4 * u], values[4 * u + 1], values[4 * u + 2], values[4 * u + 3] = row_load(
                x, xw, x_wide, x_word, start, c + u * group * CHUNK, end, NEG_INF)
        for u in range(UNROLL):
            if algorithm == ONLINE:
                m, d = online_add(m, d, values[u])
            else:
                m = max_nan(m, values[u])
        if cached:
            for u in range(CHUNKS):
                cache_put(cache, base, chunks, c + u * group * CHUNK, end, values[4 * u], values[4 * u + 1],
                          values[4 * u + 2], values[4 * u + 3])
        c += CHUNKS * group * CHUNK
    if algorithm == ONLINE:
        m, d = group_online(m, d, group)
    else:
        m = group_max(m, group)
        # Second pass: the sum of exp(x - max), from the cache or from x again.
        c = lane * CHUNK
        while c < end:
            for u in range(CHUNKS):
                cu = c + u * group * CHUNK
                if cached:
                    v = cache_get(cache, base, chunks, cu, end, NEG_INF)
                else:
                    v = row_load(x, xw, x_wide, x_word, start, cu, end, NEG_INF)
                values[4 * u], values[4 * u + 1], values[4 * u + 2], values[4 * u + 3] = v
            for u in range(UNROLL):
                if c + (u // CHUNK) * group * CHUNK + u % CHUNK < end:
                    values[u] = math.exp(values[u] - m)
                    d += values[u]
            if cached:
                for u in range(CHUNKS):
                    cache_put(cache, base, chunks, c + u * group * CHUNK, end, values[4 * u], values[4 * u + 1],
                              values[4 * u + 2], values[4 * u + 3])
            c += CHUNKS * group * CHUNK
        d = group_sum(d, group)
    # Last pass: exp(x - max) / sum.
    scale = float32(1) / d
    c = lane * CHUNK
    while c < end:
        for u in range(CHUNKS):
            cu = c + u * group * CHUNK
            if cached:
                v = cache_get(cache, base, chunks, cu, end, float32(0))
            else:
                v = row_load(x, xw, x_wide, x_word, start, cu, end, NEG_INF)
            values[4 * u], values[4 * u + 1], values[4 * u + 2], values[4 * u + 3] = v
        for u in range(CHUNKS):
            cu = c + u * group * CHUNK
            if cached:
                row_store(y, yw, y_wide, y_word, start, cu, end, values[4 * u] * scale, values[4 * u + 1] * scale,
                          values[4 * u + 2] * scale, values[4 * u + 3] * scale)
            else:
                row_store(y, yw, y_wide, y_word, start, cu, end, math.exp(values[4 * u] - m) * scale,
                          math.exp(values[4 * u + 1] - m) * scale, math.exp(values[4 * u + 2] - m) * scale,
                          math.exp(values[4 * u + 3] - m) * scale)
        c += CHUNKS * group * CHUNK


# One kernel per variant, its algorithm and whether the row is cached constants of its code.
@cuda.jit(cache=True)
def _three_pass(x, xw, xp, y, yw, yp, rows, cols, group):
    _softmax(x, xw, xp, y, yw, yp, rows, cols, group, False, THREE_PASS)


@cuda.jit(cache=True)
def _online(x, xw, xp, y, yw, yp, rows, cols, group):
    _softmax(x, xw, xp, y, yw, yp, rows, cols, group, False, ONLINE)


@cuda.jit(cache=True)
def _on_chip(x, xw, xp, y, yw, yp, rows, cols, group):
    _softmax(x, xw, xp, y, yw, yp, rows, cols, group, True, ON_CHIP)


KERNELS = {THREE_PASS: _three_pass, ONLINE: _online, ON_CHIP: _on_chip}


def _register(variant: str, algorithm: int):
    on_chip = algorithm == ON_CHIP

    @impl("softmax", "numba", variant=variant)
    def bind(x, out):
        cols = x.shape[1]

        def make(config, args, rows):
            if on_chip and not config["cached"]:
                raise ValueError(f"softmax on_chip: a {cols}-column row does not fit in 48 KiB of shared memory "
                                 "as fp32; the three_pass and online variants take it")
            return Launch(KERNELS[algorithm], grid(config, rows), config["threads"],
                          (*word_views(*args), rows, cols, config["group"]), shared_bytes(config, cols),
                          device=x.device)
        return row_launcher(("softmax", variant), f"softmax {variant}", (x, out),
                            scratch(cols, x.dtype, x.device, 1, 0), make, cacheable=on_chip)
    return bind


for _variant, _algorithm in VARIANTS.items():
    _register(_variant, _algorithm)
