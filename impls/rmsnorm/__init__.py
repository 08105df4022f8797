"""RMSNorm over the last dim: y = x · rsqrt(mean(x²) + eps) · g, statistics in fp32.
Compulsory bytes 2·R·H·s + H·s (read x, write y, read g once). One reduction per row
and O(H) flops on 2H·s bytes: memory-bound at any size.
"""
import torch

from harness.registry import Op
from impls._common import eps_param, pick, randn, rounding_tolerances


class RMSNorm(Op):
    name = "rmsnorm"
    ndim = 2
    row_op = True
    semantics = "y = x * rsqrt(mean(x^2, -1) + eps) * g"
    tolerances = rounding_tolerances(
        roundings=2, fp32_ulps=32,
        why="output rounding + one intermediate (x*r rounded before *g, as Liger's llama mode "
            "and PyTorch do); fp32: sum of squares ~log2(H) ulp + rsqrt 2 ulp")
    adversarial = {
        "large_magnitude": "|x| ~ 1e15 (fp16: ~1e4): x² overflows fp16, so squares must be fp32",
        "tiny": "|x| ~ 1e-3: mean(x²) ~ eps, so eps must sit inside the rsqrt",
        "zero_rows": "rows of zeros: y must be exactly 0, not NaN",
    }

    def __init__(self, eps: float = 1e-6, **params):
        super().__init__(eps=eps, **params)
        self.eps = eps_param(eps)

    def make_case(self, case, shape, dtype, gen, device):
        rows, hidden = shape
        std = 1.0
        if case == "large_magnitude":
            std = 1e4 if dtype == torch.float16 else 1e15
        elif case == "tiny":
            std = 1e-3
        x = randn(shape, torch.float32, gen, device, std=std)
        if dtype == torch.float16:
            x = x.clamp(-6e4, 6e4)
        x = x.to(dtype)
        if case == "zero_rows":
            x[pick(rows, max(1, rows // 4), gen, device)] = 0
        weight = randn((hidden,), dtype, gen, device, mean=1.0, std=0.1)
        return {"x": x, "weight": weight, "eps": self.eps}

    def make_output(self, inputs):
        return torch.empty_like(inputs["x"])

    def reference(self, x, weight, eps):
        x = x.to(torch.float64)
        r = torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + eps)
        return x * r * weight.to(torch.float64)

    def bytes_moved(self, shape, dtype):
        rows, hidden = shape
        n = rows * hidden * dtype.itemsize
        return n + hidden * dtype.itemsize, n
