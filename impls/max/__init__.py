"""max: the largest element of a 1-D tensor, as fp32 (exact for every input dtype).
NaN propagates: one NaN anywhere makes the result NaN. Reads N·s bytes.

Variants: ``two_pass`` (block maxima, then a second kernel) and ``atomic`` (an atomic max
per block). Max is exact and order-free, so both must give the same bits every time.
"""
import torch

from harness.registry import Op
from impls._common import EXACT, pick, randn


class Max(Op):
    name = "max"
    ndim = 1
    variants = ("two_pass", "atomic")
    semantics = "m = max(x) as fp32; NaN anywhere gives NaN"
    tolerances = EXACT
    adversarial = {
        "nan": "one NaN, of either sign bit, somewhere: the result must be NaN",
        "all_negative": "every element < 0: a kernel that starts from 0 returns 0",
        "neg_inf": "all -inf but one finite element",
        "max_last": "the maximum is the very last element (the ragged tail)",
    }

    def make_case(self, case, shape, dtype, gen, device):
        (n,) = shape
        x = randn(shape, dtype, gen, device)
        if case == "nan":
            i = pick(n, 1, gen, device)
            # A NaN with the sign bit set: 0xFFC00000 in fp32, which integer tricks misorder.
            x[i] = -torch.tensor(float("nan"), dtype=dtype, device=device).abs()
        elif case == "all_negative":
            x = -(x.abs() + 1)
        elif case == "neg_inf":
            x = torch.full(shape, -float("inf"), dtype=dtype, device=device)
            x[pick(n, 1, gen, device)] = -3.0
        elif case == "max_last":
            x[-1] = x.float().max().to(dtype) + 1
        return {"x": x}

    def make_output(self, inputs):
        return torch.empty((), dtype=torch.float32, device=inputs["x"].device)

    def reference(self, x):
        x = x.to(torch.float64)
        return x.max() if not torch.isnan(x).any() else torch.tensor(float("nan"), dtype=torch.float64)

    def bytes_moved(self, shape, dtype):
        return shape[0] * dtype.itemsize, 0
