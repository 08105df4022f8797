"""Numba scale: y = a·x in fp32, rounded once into x's dtype; 2·N·s bytes. UNROLL elements
in flight per thread (their loads before any store), a grid-stride loop; the grid is tuned."""
import numpy as np
from numba import cuda, float32

from harness.registry import impl
from impls._frameworks.numba.device import load, store
from impls._frameworks.numba.launch import UNROLL, blocks_for, tuned, with_grid
from impls._frameworks.numba.runtime import Launch, view


@cuda.jit(cache=True)
def _scale(x, y, a, n):
    values = cuda.local.array(UNROLL, float32)
    block = cuda.blockDim.x
    step = cuda.gridDim.x * block * UNROLL
    start = cuda.blockIdx.x * block * UNROLL + cuda.threadIdx.x
    while start < n:
        for u in range(UNROLL):
            i = start + u * block
            values[u] = load(x, i) if i < n else float32(0)
        for u in range(UNROLL):
            i = start + u * block
            if i < n:
                store(y, i, a * values[u])
        start += step


@impl("scale", "numba")
def bind(x, a, out):
    xs, ys, n, a32 = view(x), view(out), x.numel(), np.float32(a)

    def make(config):
        blocks = blocks_for(n, config, x.device)
        return with_grid(Launch(_scale, blocks, config["threads"], (xs, ys, a32, n), device=x.device), blocks=blocks)
    return tuned(("numba", "scale", x.dtype, n), f"scale {x.dtype} {n}", make, x.device)
