"""The harness's tensors and stream, as CuPy sees them, without copies.

- ``view``: a CuPy array on a tensor's own memory (DLPack), checked to be that memory: a copy
  would compute on stale data, which the harness's rebind check catches; here it is refused at
  bind. bf16 travels as an int16 view (CuPy has no bf16 arithmetic): only raw kernels and
  kernels that convert the bits by hand (idiomatic.py) take it.
- ``stream``: the current PyTorch stream as a CuPy stream (``Stream.from_external``, the CUDA
  stream protocol), looked up at every launch: the harness times launches between events on
  that stream, and a CUDA graph captures them from another one.
- CuPy's own allocations (the temporaries of array expressions, CUB's scratch) come from
  PyTorch's caching allocator on the current stream: one pool for both, so memory the harness
  frees after a case is free for the next, and a graph capture takes them from its own pool.
"""
from __future__ import annotations

import contextlib

import torch

_streams: dict = {}
_allocator_set = False


class _TorchBlock:
    """A block of PyTorch's caching allocator, given back when CuPy drops it."""

    def __init__(self, size: int, device: int):
        self.ptr = torch.cuda.caching_allocator_alloc(size, device, torch.cuda.current_stream(device)) if size else 0

    def __del__(self):
        if self.ptr:
            torch.cuda.caching_allocator_delete(self.ptr)


def _torch_allocator(size: int):
    import cupy
    device = cupy.cuda.runtime.getDevice()
    block = _TorchBlock(size, device)
    return cupy.cuda.memory.MemoryPointer(cupy.cuda.memory.UnownedMemory(block.ptr, size, block, device), 0)


def use_torch_allocator() -> None:
    global _allocator_set
    if not _allocator_set:
        import cupy
        cupy.cuda.set_allocator(_torch_allocator)
        _allocator_set = True


def stream():
    """The current PyTorch stream, as a CuPy stream (one wrapper per stream, kept)."""
    import cupy
    current = torch.cuda.current_stream()
    found = _streams.get(current.cuda_stream)
    if found is None:
        found = _streams[current.cuda_stream] = cupy.cuda.Stream.from_external(current)
    return found


@contextlib.contextmanager
def on_stream():
    """CuPy's current stream is PyTorch's, and CuPy allocates from PyTorch's pool, inside."""
    use_torch_allocator()
    with stream():
        yield


def view(t: torch.Tensor):
    """A CuPy array on ``t``'s memory; bf16 as int16. Raises if DLPack gave a copy."""
    import cupy
    shown = t.view(torch.int16) if t.dtype == torch.bfloat16 else t
    with on_stream():
        array = cupy.from_dlpack(shown)
    if array.data.ptr != t.data_ptr() or array.shape != tuple(t.shape):
        raise RuntimeError(f"cupy.from_dlpack gave a copy of a {tuple(t.shape)} {t.dtype} tensor, not a view "
                           f"(pointer {array.data.ptr:#x} against {t.data_ptr():#x}): the launcher would compute "
                           f"on stale data")
    return array


def views(*tensors: torch.Tensor):
    """Views for the raw kernels, which index a tensor as one contiguous run of elements: a
    strided tensor is refused (the idiomatic kernels take CuPy's strides through ``view``)."""
    for t in tensors:
        if not t.is_contiguous():
            raise ValueError(f"the CuPy raw kernels take contiguous tensors; got a {tuple(t.shape)} tensor with "
                             f"strides {t.stride()}: pass t.contiguous()")
    return tuple(view(t) for t in tensors)
