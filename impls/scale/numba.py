"""Numba scale: y = a·x in fp32, rounded once into x's dtype; 2·N·s bytes. Each thread
moves CHUNKS chunks of 4 elements a step as 8-byte words (device.chunk_load/chunk_store),
all loaded before any is stored, in a grid-stride loop; the few elements outside whole
aligned chunks (and every element when x and y are not aligned alike) one at a time. The
grid is tuned."""
import numpy as np
from numba import cuda, float32

from harness.registry import impl
from impls._frameworks.numba.device import CHUNK, chunk_load, chunk_store, end_element, flat_span, load, per_word, store
from impls._frameworks.numba.launch import CHUNKS, UNROLL, blocks_for, chosen, with_grid
from impls._frameworks.numba.runtime import Launch, flat_words


@cuda.jit(cache=True)
def _scale(x, xw, y, yw, phase, a, n):
    values = cuda.local.array(UNROLL, float32)
    first, chunks = flat_span(n, phase)
    per_chunk = CHUNK // per_word(x)     # words a chunk
    block = cuda.blockDim.x
    k = cuda.blockIdx.x * block * CHUNKS + cuda.threadIdx.x
    while k + (CHUNKS - 1) * block < chunks:     # whole steps: no bounds checks
        for u in range(CHUNKS):
            kk = k + u * block
            values[4 * u], values[4 * u + 1], values[4 * u + 2], values[4 * u + 3] = chunk_load(
                x, xw, 0, kk * per_chunk, True, CHUNK, float32(0))
        for u in range(CHUNKS):
            kk = k + u * block
            chunk_store(y, yw, 0, kk * per_chunk, True, CHUNK, a * values[4 * u], a * values[4 * u + 1],
                        a * values[4 * u + 2], a * values[4 * u + 3])
        k += cuda.gridDim.x * block * CHUNKS
    while k < chunks:                            # the last, partial step
        v0, v1, v2, v3 = chunk_load(x, xw, 0, k * per_chunk, True, CHUNK, float32(0))
        chunk_store(y, yw, 0, k * per_chunk, True, CHUNK, a * v0, a * v1, a * v2, a * v3)
        k += block
    j = cuda.grid(1)
    while j < n - CHUNK * chunks:                # the ends, one element at a time
        i = end_element(j, first, chunks)
        store(y, i, a * load(x, i))
        j += cuda.gridsize(1)


@impl("scale", "numba")
def bind(x, a, out):
    (xs, xw, ys, yw), phase = flat_words(x, out)
    n, a32 = x.numel(), np.float32(a)

    def make(config):
        blocks = blocks_for(n, config, x.device)
        return with_grid(Launch(_scale, blocks, config["threads"], (xs, xw, ys, yw, phase, a32, n), device=x.device),
                         blocks=blocks, word_phase=phase)
    return chosen("scale -", n, x.dtype, make, x.device)
