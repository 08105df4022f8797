"""Numba max: fp32 max, NaN anywhere gives NaN; reads N·s bytes. CHUNKS chunks of 4 elements
in flight per thread as 8-byte words (device.chunk_load), a grid-stride loop, then the block's shuffle tree (groups.group_max).
  two_pass: block maxima, then one block over them.
  atomic:   one cuda.atomic.max per block on an order-preserving int32 key of the fp32 bits
            (any NaN the largest key): one launch. Max is exact and order-free: both give the
            same bits every run."""
import torch
from numba import cuda, float32, int32

from harness.registry import impl
from impls._frameworks.numba.device import CHUNK, chunk_load, end_element, flat_span, load, per_word
from impls._frameworks.numba.groups import NEG_INF, group_max
from impls._frameworks.numba.primitives import bits_float, float_bits, max_nan
from impls._frameworks.numba.launch import CHUNKS, UNROLL
from impls._frameworks.numba.reduce import VARIANTS, Kernels, bind_reduce

KEY_EMPTY = -(1 << 31)      # below every float's key: the accumulator between launches
KEY_NAN = (1 << 31) - 1


@cuda.jit(device=True)
def _key(v):
    """An int32 whose order is v's: a negative float's magnitude bits flipped; NaN on top."""
    if v != v:
        return int32(KEY_NAN)
    b = int32(float_bits(v))
    return b if b >= 0 else int32(b ^ int32(0x7FFFFFFF))


@cuda.jit(device=True)
def _value(k):
    if k == int32(KEY_NAN):
        return bits_float(0x7FC00000)
    return bits_float(k if k >= 0 else int32(k ^ int32(0x7FFFFFFF)))


@cuda.jit(device=True)
def _block_max(x, xw, phase, n):
    values = cuda.local.array(UNROLL, float32)
    first, chunks = flat_span(n, phase)
    per_chunk = CHUNK // per_word(x)
    block = cuda.blockDim.x
    k = cuda.blockIdx.x * block * CHUNKS + cuda.threadIdx.x
    best = NEG_INF
    while k + (CHUNKS - 1) * block < chunks:     # whole steps: no bounds checks
        for u in range(CHUNKS):
            values[4 * u], values[4 * u + 1], values[4 * u + 2], values[4 * u + 3] = chunk_load(
                x, xw, 0, (k + u * block) * per_chunk, True, CHUNK, NEG_INF)
        for u in range(UNROLL):
            best = max_nan(best, values[u])
        k += cuda.gridDim.x * block * CHUNKS
    while k < chunks:
        v0, v1, v2, v3 = chunk_load(x, xw, 0, k * per_chunk, True, CHUNK, NEG_INF)
        best = max_nan(max_nan(best, v0), max_nan(v1, max_nan(v2, v3)))
        k += block
    j = cuda.grid(1)
    while j < n - CHUNK * chunks:
        best = max_nan(best, load(x, end_element(j, first, chunks)))
        j += cuda.gridsize(1)
    return group_max(best, block)


@cuda.jit(cache=True)
def _partials(x, xw, phase, partial, n):
    best = _block_max(x, xw, phase, n)
    if cuda.threadIdx.x == 0:
        partial[cuda.blockIdx.x] = best


@cuda.jit(cache=True)
def _finish(partial, out, count):
    best = NEG_INF
    i = cuda.threadIdx.x
    while i < count:
        best = max_nan(best, partial[i])
        i += cuda.blockDim.x
    best = group_max(best, cuda.blockDim.x)
    if cuda.threadIdx.x == 0:
        out[0] = best


@cuda.jit(cache=True)
def _atomic(x, xw, phase, out, acc, ticket, n):
    best = _block_max(x, xw, phase, n)
    if cuda.threadIdx.x == 0:
        cuda.atomic.max(acc, 0, _key(best))
        cuda.threadfence()
        if cuda.atomic.add(ticket, 0, 1) == cuda.gridDim.x - 1:   # the last block: every max is in
            out[0] = _value(cuda.atomic.max(acc, 0, int32(KEY_EMPTY)))
            acc[0] = int32(KEY_EMPTY)
            ticket[0] = 0


KERNELS = Kernels("max", _partials, _finish, _atomic, acc_dtype=torch.int32, acc_start=KEY_EMPTY)


def _register(variant):
    @impl("max", "numba", variant=variant)
    def bind(x, out):
        return bind_reduce(KERNELS, variant, x, out)
    return bind


for _variant in VARIANTS:
    _register(_variant)
