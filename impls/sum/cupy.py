"""CuPy sum: one fp32 sum; reads N·s bytes.
  idiomatic: cupy.sum(x, dtype=float32) (CuPy takes CUB's device-wide reduction where it can);
             bf16, which cupy.sum cannot read, through a ReductionKernel over the 16-bit view.
  two_pass:  the CUDA extension's (sum.cuh, reduce_1d.cuh) through NVRTC: 16-byte packs, four in flight per thread, shuffle trees; partials,
             then one block over them in a fixed order: the same bits every run.
  atomic:    the same reduction, one atomicAdd per block into an accumulator: one launch, bits
             vary run to run."""
import torch

from harness.registry import impl
from impls._frameworks.cupy import idiomatic, launch


@impl("sum", "cupy", variant="idiomatic")
def bind_idiomatic(x, out):
    import cupy
    if x.dtype == torch.bfloat16:
        kernel = idiomatic.sum_of("ld(x)", "harness_sum")

        def compute(v, y):
            kernel(v["x"], out=y)
        return idiomatic.launcher(compute, {"x": x}, out, "ReductionKernel (bf16: cupy.sum cannot read it)")

    def compute(v, y):
        cupy.sum(v["x"], dtype=cupy.float32, out=y)
    return idiomatic.launcher(compute, {"x": x}, out, "cupy.sum")


def _register(variant):
    @impl("sum", "cupy", variant=variant)
    def bind(x, out):
        return launch.reduce_1d("sum", variant, x, out)
    return bind


for _variant in ("two_pass", "atomic"):
    _register(_variant)
