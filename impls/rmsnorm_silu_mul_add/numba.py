"""Numba chain y = silu(rmsnorm(x; g)) · u + r.
  fused:   one kernel: the row's rsqrt(mean(x²) + eps) (the Numba RMSNorm's first pass, the
           row kept in shared memory where it fits), then silu(n)·u + r per element in fp32,
           rounded once: 4·R·H·s + H·s bytes. 16-bit outputs take functions.silu16 (ex2 and an
           approximate reciprocal, as the CUDA kernel's silu_16), fp32 the accurate silu.
  unfused: the Numba RMSNorm, then silu, mul and add as elementwise kernels, each
           intermediate rounded to the dtype, written and read back (~10·R·H·s bytes)."""
import numpy as np
import torch
from numba import cuda, float32, uint32

from harness.registry import impl
from impls._frameworks._launch import configured, scratch
from impls._frameworks.numba.device import CHUNK, chunk_load, chunk_store, end_element, flat_span, load, per_word, store
from impls._frameworks.numba.functions import row_silu, silu
from impls._frameworks.numba.primitives import inlined
from impls._frameworks.numba.launch import CHUNKS as FLAT_CHUNKS
from impls._frameworks.numba.launch import blocks_for, chosen, with_grid
from impls._frameworks.numba.rowchunks import (CACHED, KEPT, chunk_words, put_chunk, refetch_step, row_setup,
                                               row_words, step_of, step_value, value_of, width)
from impls._frameworks.numba.rows import (CHUNKS, KEEPS, MAX_CHUNK, STEP_MAX, STEP_WORDS, launch,
                                          row_launcher)
from impls._frameworks.numba.runtime import SIMULATED, Launch, flat_words
from impls.rmsnorm.numba import bind as rmsnorm_bind
from impls.rmsnorm.numba import row_rstd

SILU, MUL, ADD = 0, 1, 2
STEPS = {SILU: "silu", MUL: "mul", ADD: "add"}   # the unfused steps' kernels, as the config tables name them
# The output pass takes a step's chunks of x (kept from the first pass where one step covers
# the row) a part at a time: u and r for a part's chunks (one of a 16-bit type, two of fp32:
# 8 values of each, as words) beside x's step stay in registers; a whole step of u and r at
# once (48 values of fp32) put bf16's in local memory (ptxas: a 192-byte stack frame) and
# fp32's at 118 registers; two 16-bit chunks a part took 56 registers (bf16, kept), one 48.
PART_WORDS = 8       # a local array's size must be a constant: two chunks' words


@inlined
def _part(h, words, values, gates, residuals, gains, out, rstd, x, u, uw, u_wide, u_word, r, rw, r_wide, r_word,
          weight, ww, w_wide, w_word, y, yw, y_wide, y_word, start, k, group, n, kind, whole):
    """Part h of a step's output (its chunks h·part .. h·part + part - 1). A function called
    with h a constant, not a loop over h: a loop LLVM does not unroll (the kernel for any rows
    in fp32) indexes the step by a variable, which puts it in local memory."""
    span = width(x)
    part = 8 // span                # chunks a part: 1 of a 16-bit type, 2 of fp32
    if h >= CHUNKS // part:
        return
    for j in range(part):
        kj = uint32(k + uint32((h * part + j) * group))
        chunk_words(gates, j * 4, u, uw, u_wide, u_word, start, kj, n, float32(0), whole)
        chunk_words(residuals, j * 4, r, rw, r_wide, r_word, start, kj, n, float32(0), whole)
    for j in range(part):
        kj = uint32(k + uint32((h * part + j) * group))
        chunk_words(gains, 0, weight, ww, w_wide, w_word, 0, kj, n, float32(0), whole)
        for t in range(span):
            i, o = (h * part + j) * span + t, j * span + t
            normed = step_value(x, words, values, i, kind == CACHED) * rstd * value_of(weight, gains, t)
            out[t] = row_silu(x, normed) * value_of(u, gates, o) + value_of(r, residuals, o)
        put_chunk(y, yw, y_wide, y_word, start, kj, n, out, whole)


@inlined
def _fused(x, xw, xp, weight, ww, wp, u, uw, up, r, rw, rp, y, yw, yp, rows, cols, eps, group, kind, whole):
    cache = cuda.shared.array(0, float32)
    words = cuda.local.array(STEP_WORDS, uint32)
    values = cuda.local.array(STEP_MAX, float32)
    gates = cuda.local.array(PART_WORDS, uint32)
    residuals = cuda.local.array(PART_WORDS, uint32)
    gains = cuda.local.array(4, uint32)
    out = cuda.local.array(MAX_CHUNK, float32)
    lane, n, start, chunks, base, x_wide, x_word = row_setup(x, xp, cache, group, rows, cols)
    rstd = row_rstd(words, values, x, xw, x_wide, x_word, start, n, chunks, cols, eps, group, lane, cache, base, kind,
                    whole)
    u_wide, u_word = row_words(u, up, start)
    r_wide, r_word = row_words(r, rp, start)
    y_wide, y_word = row_words(y, yp, start)
    w_wide, w_word = row_words(weight, wp, 0)
    k = lane
    while k < chunks:
        refetch_step(kind, words, values, x, xw, x_wide, x_word, start, cache, base, chunks, k, group, n, float32(0),
                     whole)
        # a step has CHUNKS (4) chunks, a part one or two of them: four parts at most
        _part(0, words, values, gates, residuals, gains, out, rstd, x, u, uw, u_wide, u_word, r, rw, r_wide, r_word,
              weight, ww, w_wide, w_word, y, yw, y_wide, y_word, start, k, group, n, kind, whole)
        _part(1, words, values, gates, residuals, gains, out, rstd, x, u, uw, u_wide, u_word, r, rw, r_wide, r_word,
              weight, ww, w_wide, w_word, y, yw, y_wide, y_word, start, k, group, n, kind, whole)
        _part(2, words, values, gates, residuals, gains, out, rstd, x, u, uw, u_wide, u_word, r, rw, r_wide, r_word,
              weight, ww, w_wide, w_word, y, yw, y_wide, y_word, start, k, group, n, kind, whole)
        _part(3, words, values, gates, residuals, gains, out, rstd, x, u, uw, u_wide, u_word, r, rw, r_wide, r_word,
              weight, ww, w_wide, w_word, y, yw, y_wide, y_word, start, k, group, n, kind, whole)
        if kind == KEPT:
            break
        k = uint32(k + step_of(x, group))


# One kernel per row shape (rows.whole: whole, 16-byte aligned chunks, or any rows) and keep
# (rows.keep), constants of its code, over one body.
def _kernel(whole_rows, kind):
    def kernel(x, xw, xp, weight, ww, wp, u, uw, up, r, rw, rp, y, yw, yp, rows, cols, eps, group):
        _fused(x, xw, xp, weight, ww, wp, u, uw, up, r, rw, rp, y, yw, yp, rows, cols, eps, group, kind, whole_rows)
    kernel.__name__ = kernel.__qualname__ = f"_fused{'_whole' if whole_rows else ''}_{KEEPS[kind]}"
    return cuda.jit(cache=True)(kernel)


KERNELS = {(w, kind): _kernel(w, kind) for w in (True, False) for kind in KEEPS}


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
        return launch(KERNELS, (), config, args, rows, (np.float32(eps),), "Numba rmsnorm_silu_mul_add fused")
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
        return chosen(f"rmsnorm_silu_mul_add {STEPS[operation]}", n, a.dtype, make, a.device)
    silu_step, mul, add = step(SILU, normed, normed, activated), step(MUL, activated, u, product), \
        step(ADD, product, r, out)

    def launch():
        norm()
        silu_step()
        mul()
        add()
    config = {"rmsnorm": norm.config, "silu": silu_step.config, "mul": mul.config, "add": add.config}
    return configured(launch, {**config, "simulated": True} if SIMULATED else config)
