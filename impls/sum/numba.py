"""Numba sum: one fp32 sum; reads N·s bytes. UNROLL loads in flight per thread, each added
in turn into the thread's fp32 total, a grid-stride loop; then the block's shuffle tree
(device.group_sum over the whole block).
  two_pass: a partial per block, then one block over the partials in a fixed tree: the same
            bits every run.
  atomic:   one cuda.atomic.add per block (never per element): one launch, but the order
            the blocks arrive in changes the bits from run to run."""
import torch
from numba import cuda, float32

from harness.registry import impl
from impls._frameworks.numba.device import group_sum, load
from impls._frameworks.numba.launch import UNROLL
from impls._frameworks.numba.reduce import VARIANTS, Kernels, bind_reduce


@cuda.jit(device=True)
def _block_total(x, n):
    """This thread's fp32 total of its elements, reduced over the block (every thread gets it)."""
    values = cuda.local.array(UNROLL, float32)
    block = cuda.blockDim.x
    step = cuda.gridDim.x * block * UNROLL
    start = cuda.blockIdx.x * block * UNROLL + cuda.threadIdx.x
    total = float32(0)
    while start < n:
        for u in range(UNROLL):
            i = start + u * block
            values[u] = load(x, i) if i < n else float32(0)
        for u in range(UNROLL):
            total += values[u]
        start += step
    return group_sum(total, block)


@cuda.jit(cache=True)
def _partials(x, partial, n):
    total = _block_total(x, n)
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
def _atomic(x, out, acc, ticket, n):
    total = _block_total(x, n)
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
