"""Numba sum: one fp32 sum; reads N·s bytes. Each thread loads CHUNKS chunks of 4 elements a
step as 8-byte words (device.chunk_load), then adds them in turn into its fp32 total, in a
grid-stride loop; the elements outside whole aligned chunks one at a time, last (the chunks
start at x's first 8-byte aligned element, so the order, and the bits, follow x's address);
then the block's shuffle tree (groups.group_sum over the whole block).
  two_pass: a partial per block, then one block over the partials in a fixed tree: the same
            bits every run.
  atomic:   one cuda.atomic.add per block (never per element): one launch, but the order
            the blocks arrive in changes the bits from run to run."""
import torch
from numba import cuda, float32

from harness.registry import impl
from impls._frameworks.numba.device import CHUNK, chunk_load, end_element, flat_span, load, per_word
from impls._frameworks.numba.groups import group_sum
from impls._frameworks.numba.launch import CHUNKS, UNROLL
from impls._frameworks.numba.reduce import VARIANTS, Kernels, bind_reduce


@cuda.jit(device=True)
def _block_total(x, xw, phase, n):
    """This thread's fp32 total of its elements, reduced over the block (every thread gets it):
    its chunks in order, each chunk's four in order, then the ends (device.flat_span)."""
    values = cuda.local.array(UNROLL, float32)
    first, chunks = flat_span(n, phase)
    per_chunk = CHUNK // per_word(x)
    block = cuda.blockDim.x
    k = cuda.blockIdx.x * block * CHUNKS + cuda.threadIdx.x
    total = float32(0)
    while k + (CHUNKS - 1) * block < chunks:     # whole steps: no bounds checks
        for u in range(CHUNKS):
            values[4 * u], values[4 * u + 1], values[4 * u + 2], values[4 * u + 3] = chunk_load(
                x, xw, 0, (k + u * block) * per_chunk, True, CHUNK, float32(0))
        for u in range(UNROLL):
            total += values[u]
        k += cuda.gridDim.x * block * CHUNKS
    while k < chunks:
        v0, v1, v2, v3 = chunk_load(x, xw, 0, k * per_chunk, True, CHUNK, float32(0))
        total += v0
        total += v1
        total += v2
        total += v3
        k += block
    j = cuda.grid(1)
    while j < n - CHUNK * chunks:
        total += load(x, end_element(j, first, chunks))
        j += cuda.gridsize(1)
    return group_sum(total, block)


@cuda.jit(cache=True)
def _partials(x, xw, phase, partial, n):
    total = _block_total(x, xw, phase, n)
    if cuda.threadIdx.x == 0:
        partial[cuda.blockIdx.x] = total


@cuda.jit(cache=True)
def _finish(partial, out, count):
    total = float32(0)
    i = cuda.threadIdx.x
    while i < count:
        total += partial[i]
        i += cuda.blockDim.x
    total = group_sum(total, cuda.blockDim.x)
    if cuda.threadIdx.x == 0:
        out[0] = total


@cuda.jit(cache=True)
def _atomic(x, xw, phase, out, acc, ticket, n):
    total = _block_total(x, xw, phase, n)
    if cuda.threadIdx.x == 0:
        cuda.atomic.add(acc, 0, total)
        cuda.threadfence()
        if cuda.atomic.add(ticket, 0, 1) == cuda.gridDim.x - 1:   # the last block: every add is in
            out[0] = cuda.atomic.add(acc, 0, float32(0))
            acc[0] = float32(0)
            ticket[0] = 0


KERNELS = Kernels("sum", _partials, _finish, _atomic, acc_dtype=torch.float32, acc_start=0.0)


def _register(variant):
    @impl("sum", "numba", variant=variant)
    def bind(x, out):
        return bind_reduce(KERNELS, variant, x, out)
    return bind


for _variant in VARIANTS:
    _register(_variant)
