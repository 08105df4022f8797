"""CUDA max (max.cu, reduce_1d.cuh): fp32 max, NaN anywhere gives NaN; reads N·s bytes.
  two_pass: 16-byte packs, four in flight per thread, shuffle trees; partials, then one block.
  atomic:   one atomicMax per block on an order-preserving unsigned key (any NaN the largest):
            one launch. Max is exact and order-free: both give the same bits every run."""
from harness.registry import impl
from impls._frameworks.cuda import build
from impls._frameworks.cuda.reduce import VARIANTS, bind_reduce


def _register(variant):
    @impl("max", "cuda", variant=variant)
    def bind(x, out):
        return bind_reduce(build.load().max, "max", variant, x, out)
    return bind


for _variant in VARIANTS:
    _register(_variant)
