"""Numba chain y = silu(rmsnorm(x; g)) · u + r.
  fused:   one kernel: the row's rsqrt(mean(x²) + eps) (the Numba RMSNorm's first pass, the
           row kept in shared memory where it fits), then silu(n)·u + r per element in fp32,
           rounded once: 4·R·H·s + H·s bytes.
  unfused: the Numba RMSNorm, then silu, mul and add as elementwise kernels, each
           intermediate rounded to the dtype, written and read back (~10·R·H·s bytes)."""
import numpy as np
import torch
from numba import cuda, float32

from harness.registry import impl
from impls._frameworks._launch import configured, scratch
from impls._frameworks.numba.device import (CHUNK, cache_get, chunk_load, chunk_store, end_element, flat_span, load,
                                            per_word, row_load, row_store, row_words, silu, store)
from impls._frameworks.numba.launch import CHUNKS as FLAT_CHUNKS
from impls._frameworks.numba.launch import blocks_for, tuned, with_grid
from impls._frameworks.numba.rows import grid, row_launcher, shared_bytes
from impls._frameworks.numba.runtime import SIMULATED, Launch, flat_words, word_views
from impls.rmsnorm.numba import bind as rmsnorm_bind
from impls.rmsnorm.numba import row_rstd

SILU, MUL, ADD = 0, 1, 2
# Chunks in flight per thread in the fused kernel's output pass: x, u and r, 8 columns of each
# (24 values) stay in registers; rows.CHUNKS (48 values) put bf16's in local memory (ptxas:
# a 192-byte stack frame) and fp32's at 118 registers.
FUSED_CHUNKS = 2
FUSED_UNROLL = 8


@cuda.jit(cache=True)
def _fused(x, xw, xp, weight, ww, wp, u, uw, up, r, rw, rp, y, yw, yp, rows, cols, eps, group, cached):
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
    u_wide, u_word = row_words(u, up, start)
    r_wide, r_word = row_words(r, rp, start)
    y_wide, y_word = row_words(y, yp, start)
    w_wide, w_word = row_words(weight, wp, 0)
    values = cuda.local.array(FUSED_UNROLL, float32)
    gates = cuda.local.array(FUSED_UNROLL, float32)
    residuals = cuda.local.array(FUSED_UNROLL, float32)
    c = lane * CHUNK
    while c < end:
        for k in range(FUSED_CHUNKS):
            ck = c + k * group * CHUNK
            if cached:
                v = cache_get(cache, base, chunks, ck, end, float32(0))
            else:
                v = row_load(x, xw, x_wide, x_word, start, ck, end, float32(0))
            values[4 * k], values[4 * k + 1], values[4 * k + 2], values[4 * k + 3] = v
            gates[4 * k], gates[4 * k + 1], gates[4 * k + 2], gates[4 * k + 3] = row_load(
                u, uw, u_wide, u_word, start, ck, end, float32(0))
            residuals[4 * k], residuals[4 * k + 1], residuals[4 * k + 2], residuals[4 * k + 3] = row_load(
                r, rw, r_wide, r_word, start, ck, end, float32(0))
        for k in range(FUSED_CHUNKS):
            ck = c + k * group * CHUNK
            g0, g1, g2, g3 = row_load(weight, ww, w_wide, w_word, 0, ck, end, float32(0))
            i = 4 * k
            row_store(y, yw, y_wide, y_word, start, ck, end,
                      silu(values[i] * rstd * g0) * gates[i] + residuals[i],
                      silu(values[i + 1] * rstd * g1) * gates[i + 1] + residuals[i + 1],
                      silu(values[i + 2] * rstd * g2) * gates[i + 2] + residuals[i + 2],
                      silu(values[i + 3] * rstd * g3) * gates[i + 3] + residuals[i + 3])
        c += FUSED_CHUNKS * group * CHUNK


@cuda.jit(cache=True)
def _step(a, aw, b, bw, y, yw, phase, n, operation):
    """One elementwise step of the unfused chain: silu(a), a·b or a + b, rounded into y's type;
    chunks of 4 as 8-byte words, the ends one element at a time (as Numba's scale)."""
    first, chunks = flat_span(n, phase)
    per_chunk = CHUNK // per_word(a)
    block = cuda.blockDim.x
    k = cuda.blockIdx.x * block * FLAT_CHUNKS + cuda.threadIdx.x
    while k < chunks:
        for s in range(FLAT_CHUNKS):          # each chunk masked: the unfused steps stay simple
            kk = k + s * block
            if kk < chunks:
                a0, a1, a2, a3 = chunk_load(a, aw, 0, kk * per_chunk, True, CHUNK, float32(0))
                if operation == SILU:
                    chunk_store(y, yw, 0, kk * per_chunk, True, CHUNK, silu(a0), silu(a1), silu(a2), silu(a3))
                else:
                    b0, b1, b2, b3 = chunk_load(b, bw, 0, kk * per_chunk, True, CHUNK, float32(0))
                    if operation == MUL:
                        chunk_store(y, yw, 0, kk * per_chunk, True, CHUNK, a0 * b0, a1 * b1, a2 * b2, a3 * b3)
                    else:
                        chunk_store(y, yw, 0, kk * per_chunk, True, CHUNK, a0 + b0, a1 + b1, a2 + b2, a3 + b3)
        k += cuda.gridDim.x * block * FLAT_CHUNKS
    j = cuda.grid(1)
    while j < n - CHUNK * chunks:
        i = end_element(j, first, chunks)
        if operation == SILU:
            store(y, i, silu(load(a, i)))
        elif operation == MUL:
            store(y, i, load(a, i) * load(b, i))
        else:
            store(y, i, load(a, i) + load(b, i))
        j += cuda.gridsize(1)


@impl("rmsnorm_silu_mul_add", "numba", variant="fused")
def bind_fused(x, weight, u, r, eps, out):
    cols = x.shape[1]

    def make(config, args, rows):
        return Launch(_fused, grid(config, rows), config["threads"],
                      (*word_views(*args), rows, cols, np.float32(eps), config["group"], config["cached"]),
                      shared_bytes(config, cols), device=x.device)
    return row_launcher(("rmsnorm_silu_mul_add", "fused"), "rmsnorm_silu_mul_add fused", (x, weight, u, r, out),
                        scratch(cols, x.dtype, x.device, 3, 1), make, cacheable=True)


@impl("rmsnorm_silu_mul_add", "numba", variant="unfused")
def bind_unfused(x, weight, u, r, eps, out):
    normed, activated, product = (torch.empty_like(x) for _ in range(3))
    norm = rmsnorm_bind(x, weight, eps, normed)

    def step(operation, a, b, y):
        views, phase = flat_words(a, b, y)
        n = a.numel()

        def make(config):
            blocks = blocks_for(n, config, a.device)
            return with_grid(Launch(_step, blocks, config["threads"], (*views, phase, n, operation), device=a.device),
                             blocks=blocks, word_phase=phase)
        return tuned(("numba", "chain step", operation, a.dtype, n), f"chain step {operation} {a.dtype} {n}", make,
                     a.device)
    silu_step, mul, add = step(SILU, normed, normed, activated), step(MUL, activated, u, product), \
        step(ADD, product, r, out)

    def launch():
        norm()
        silu_step()
        mul()
        add()
    config = {"rmsnorm": norm.config, "silu": silu_step.config, "mul": mul.config, "add": add.config}
    return configured(launch, {**config, "simulated": True} if SIMULATED else config)
