"""CuPy scale: y = a·x in fp32, rounded once; reads and writes N·s bytes.
  idiomatic: an ElementwiseKernel (one element per thread, CuPy's own indexing and scalar
             loads), a taken as float32 so the product is fp32 for every dtype.
  tuned:     the CUDA extension's vector scale (scale.cuh, elementwise.cuh) through NVRTC:
             16-byte packs, four in flight per thread, a grid-stride loop, the grid tuned."""
import numpy as np

from harness.registry import impl
from impls._frameworks.cupy import idiomatic, launch


@impl("scale", "cupy", variant="idiomatic")
def bind_idiomatic(x, a, out):
    kernel = idiomatic.elementwise("X x, float32 a", "X y", "y = st<X>(a * ld(x))", "harness_scale")
    factor = np.float32(a)

    def compute(v, y):
        kernel(v["x"], factor, y)
    return idiomatic.launcher(compute, {"x": x}, out, "ElementwiseKernel")


@impl("scale", "cupy", variant="tuned")
def bind_tuned(x, a, out):
    return launch.elementwise("scale", "Times", np.float32(a), x, out)   # Times{float a}, by value
