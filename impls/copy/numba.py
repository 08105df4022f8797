"""Numba copy: the bits, unconverted, as the widest words (8, 4 or 2 bytes) both tensors'
alignment and size allow; four words in flight per thread, a grid-stride loop. Reads and
writes N·s bytes each; the grid is tuned."""
import torch
from numba import cuda

from harness.registry import impl
from impls._frameworks.numba.launch import blocks_for, chosen, with_grid
from impls._frameworks.numba.runtime import Launch, view

WORDS = {8: torch.int64, 4: torch.int32, 2: torch.int16}


@cuda.jit(cache=True)
def _copy(x, y, n):
    # Four loads before any store: four words in flight per thread.
    block = cuda.blockDim.x
    step = cuda.gridDim.x * block * 4
    i = cuda.blockIdx.x * block * 4 + cuda.threadIdx.x
    while i + 3 * block < n:
        a, b, c, d = x[i], x[i + block], x[i + 2 * block], x[i + 3 * block]
        y[i], y[i + block], y[i + 2 * block], y[i + 3 * block] = a, b, c, d
        i += step
    while i < n:   # the last, partial step
        y[i] = x[i]
        i += block


def word_size(*tensors) -> int:
    """The widest word every tensor's address and byte size are a multiple of."""
    for size in (8, 4, 2):
        if size >= tensors[0].element_size() and all(
                t.data_ptr() % size == 0 and t.numel() * t.element_size() % size == 0 for t in tensors):
            return size
    return tensors[0].element_size()


def raw(t: torch.Tensor, size: int) -> torch.Tensor:
    return t.view(torch.uint8).view(WORDS[size]) if size in WORDS else t


@impl("copy", "numba")
def bind(x, out):
    size = word_size(x, out)
    xs, ys = view(raw(x, size)), view(raw(out, size))
    n = x.numel() * x.element_size() // size

    def make(config):
        blocks = blocks_for(n, config, x.device)
        return with_grid(Launch(_copy, blocks, config["threads"], (xs, ys, n), device=x.device), blocks=blocks,
                         word_bytes=size)
    return chosen("copy -", x.numel(), x.dtype, make, x.device)
