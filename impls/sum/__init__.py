"""sum: one fp32 sum of a 1-D tensor. Reads N·s bytes; the 4-byte result is not counted.

Variants: ``two_pass`` (per-block partials, then a second kernel over them: the same bits
every time) and ``atomic`` (each block adds its partial into the result with an atomic:
one launch, but the order of the additions changes from run to run, and so do the bits).
"""
import torch

from harness.registry import Op, Tol
from impls._common import DTYPES, randn, uniform

# Error bound of a blocked fp32 sum: depth x u32 x sum|x|. The depth is log2 of the block
# tree plus the run of sequential additions into one word (up to ~1000 atomics or
# partials), so 2^-14 (~1000 ulps) of sum|x|. A running fp32 total over the 'many_terms'
# inputs stalls at 2^22 and misses by ~16%; bf16/fp16 accumulation misses by ~2^-8: both fail.
SUM_TOL = Tol(rtol=0.0, atol=2.0 ** -14,
              why="fp32 accumulation: tree depth plus up to ~1000 sequential adds, x u32, relative to sum|x|")


class Sum(Op):
    name = "sum"
    ndim = 1
    variants = ("two_pass", "atomic")
    semantics = "s = sum(x), accumulated and returned in fp32"
    tolerances = {d: SUM_TOL for d in DTYPES}
    adversarial = {
        "cancellation": "large values of both signs that cancel: the sum is tiny against sum|x|",
        "many_terms": "2^25+3 terms in [0.1, 0.2): a running fp32 total stops growing at 2^22",
    }

    def make_case(self, case, shape, dtype, gen, device):
        (n,) = shape
        if case == "cancellation":
            half = randn(((n + 1) // 2,), torch.float32, gen, device, std=1e4).to(dtype)
            x = torch.cat([half, -half])[:n]                 # exact opposites, then noise
            x = x + randn((n,), dtype, gen, device, std=1e-2)
            x = x[torch.randperm(n, generator=gen, device=device)]
        elif case == "many_terms":
            x = uniform((2 ** 25 + 3,), dtype, gen, device, 0.1, 0.2)
        else:
            x = randn(shape, dtype, gen, device)
        return {"x": x}

    def make_output(self, inputs):
        return torch.empty((), dtype=torch.float32, device=inputs["x"].device)

    def reference(self, x):
        return x.to(torch.float64).sum()

    def error_scale(self, inputs, ref):
        return inputs["x"].to(torch.float64).abs().sum()

    def bytes_moved(self, shape, dtype):
        return shape[0] * dtype.itemsize, 0
