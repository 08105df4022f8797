"""CuPy max: fp32 max, NaN anywhere gives NaN; reads N·s bytes.
  idiomatic: cupy.max (CuPy takes CUB's device-wide reduction where it can; fp16's max copied
             into the fp32 output); bf16, which cupy.max cannot read, through a ReductionKernel
             over the 16-bit view.
  two_pass:  the CUDA extension's (max.cuh, reduce_1d.cuh) through NVRTC: 16-byte packs, four in flight per thread, shuffle trees; partials,
             then one block.
  atomic:    one atomicMax per block on an order-preserving unsigned key (NaN the largest).
Max is exact and order-free: every variant gives the same bits every run."""
import torch

from harness.registry import impl
from impls._frameworks.cupy import idiomatic, launch


@impl("max", "cupy", variant="idiomatic")
def bind_idiomatic(x, out):
    import cupy
    if x.dtype == torch.bfloat16:
        kernel = idiomatic.max_of("ld(x)", "harness_max")

        def compute(v, y):
            kernel(v["x"], out=y)
        return idiomatic.launcher(compute, {"x": x}, out, "ReductionKernel (bf16: cupy.max cannot read it)")
    if x.dtype == torch.float32:
        def compute(v, y):
            cupy.max(v["x"], out=y)
    else:
        def compute(v, y):
            cupy.copyto(y, cupy.max(v["x"]))
    return idiomatic.launcher(compute, {"x": x}, out, "cupy.max")


def _register(variant):
    @impl("max", "cupy", variant=variant)
    def bind(x, out):
        return launch.reduce_1d("max", variant, x, out)
    return bind


for _variant in ("two_pass", "atomic"):
    _register(_variant)
