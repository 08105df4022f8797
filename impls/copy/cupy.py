"""CuPy copy; reads and writes N·s bytes.
  idiomatic: cupy.copyto between the two views (bf16 as int16 views: the bits pass through).
  tuned:     the CUDA extension's copy kernel (copy.cuh, elementwise.cuh) through NVRTC: 16-byte
             packs, four in flight per thread, a grid-stride loop, the grid tuned; element by
             element where x and the output are not as far from a 16-byte boundary."""
import numpy as np

from harness.registry import impl
from impls._frameworks.cupy import idiomatic, launch


@impl("copy", "cupy", variant="idiomatic")
def bind_idiomatic(x, out):
    import cupy

    def compute(a, y):
        cupy.copyto(y, a["x"])
    return idiomatic.launcher(compute, {"x": x}, out, "cupy.copyto")


@impl("copy", "cupy", variant="tuned")
def bind_tuned(x, out):
    return launch.elementwise("copy", "Identity", np.int8(0), x, out)   # an empty functor: one byte
