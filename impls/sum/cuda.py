"""CUDA sum (sum.cu, reduce_1d.cuh): one fp32 sum; reads N·s bytes.
  naive:    Harris's interleaved shared-memory tree, one element per thread, the kernel again
            over the partials until one is left: divergent warps and one load in flight.
  two_pass: 16-byte packs, four in flight per thread, shuffle trees; partials, then one
            block over them in a fixed tree: the same bits every run.
  atomic:   the same reduction, one atomicAdd per block: one launch, bits vary run to run."""
import torch

from harness.registry import impl
from impls._frameworks._launch import configured
from impls._frameworks.cuda import build
from impls._frameworks.cuda.launch import NAIVE_THREADS
from impls._frameworks.cuda.reduce import VARIANTS, bind_reduce


def naive_scratch(n: int, threads: int) -> int:
    """Floats for every pass's partials but the last (which writes the result)."""
    total = 0
    while n > threads:
        n = -(-n // threads)
        total += n
    return max(total, 1)


@impl("sum", "cuda", variant="naive")
def bind_naive(x, out):
    ops = build.load()
    scratch = torch.empty(naive_scratch(x.numel(), NAIVE_THREADS), dtype=torch.float32, device=x.device)
    return configured(lambda: ops.sum_naive(x, out, scratch, NAIVE_THREADS), {"threads": NAIVE_THREADS})


def _register(variant):
    @impl("sum", "cuda", variant=variant)
    def bind(x, out):
        return bind_reduce(build.load().sum, "sum", variant, x, out)
    return bind


for _variant in VARIANTS:
    _register(_variant)
