"""The fused chain y = silu(rmsnorm(x; g)) · u + r, over the last dim.
Compulsory bytes 4·R·H·s + H·s: read x, u, r once, write y once, read g once.
As four separate kernels it moves ~10·R·H·s (each intermediate written and read back):
the case for fusion. Variants: ``fused`` (one kernel) and ``unfused`` (the same
framework's separate kernels, intermediates rounded to the input dtype).
"""
import torch

from harness.registry import Op
from impls._common import eps_param, randn, rounding_tolerances


class RMSNormSiluMulAdd(Op):
    name = "rmsnorm_silu_mul_add"
    ndim = 2
    variants = ("fused", "unfused")
    row_op = True
    row_args = ("x", "u", "r")
    semantics = "y = silu(x * rsqrt(mean(x^2) + eps) * g) * u + r"
    # silu(n)·u and r can cancel, so the error is measured against the terms (error_scale):
    # the unfused chain rounds 3 intermediates (rmsnorm, silu, mul) into the dtype, then the output.
    tolerances = rounding_tolerances(
        roundings=1, fp32_ulps=32, scaled_roundings=3, scaled_ulps=32,
        why="output rounding, plus three intermediate roundings of the unfused chain relative to "
            "the terms (error_scale); fp32 ~32 ulp")
    adversarial = {
        "large_gain": "g ~ N(0, 100): silu of large negative values (exp(-n) overflows to inf)",
        "cancellation": "r = -silu(n)·u + small: the output is tiny against its terms",
    }

    def __init__(self, eps: float = 1e-6, **params):
        super().__init__(eps=eps, **params)
        self.eps = eps_param(eps)

    def make_case(self, case, shape, dtype, gen, device):
        rows, hidden = shape
        x = randn(shape, dtype, gen, device)
        u = randn(shape, dtype, gen, device)
        std_g = 100.0 if case == "large_gain" else 0.1
        weight = randn((hidden,), dtype, gen, device, mean=1.0 if case != "large_gain" else 0.0, std=std_g)
        if case == "cancellation":
            n = self._normed(x, weight, self.eps)
            r = (-(n * torch.sigmoid(n)) * u.to(torch.float64)).to(dtype)
            r = (r.float() + randn(shape, torch.float32, gen, device, std=1e-3)).to(dtype)
        else:
            r = randn(shape, dtype, gen, device)
        return {"x": x, "weight": weight, "u": u, "r": r, "eps": self.eps}

    @staticmethod
    def _normed(x, weight, eps):
        x = x.to(torch.float64)
        return x * torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + eps) * weight.to(torch.float64)

    def make_output(self, inputs):
        return torch.empty_like(inputs["x"])

    def reference(self, x, weight, u, r, eps):
        n = self._normed(x, weight, eps)
        return n * torch.sigmoid(n) * u.to(torch.float64) + r.to(torch.float64)

    def error_scale(self, inputs, ref):
        """The terms the error follows: |r|, |silu(n)·u|, and |n·silu'(n)·u| — rounding n
        perturbs it by a relative u, which silu magnifies by n·silu'(n)/silu(n) (~|n| for
        large negative n, where silu(n) ~ n·e^n). A value rounded into the dtype errs by u
        times the larger of itself and the dtype's smallest normal: below that the error is
        half a subnormal step, not relative (fp16's silu(n) for n in (-21, -12); times |u| ~4
        it is twice the output's own floor), so |n| and |silu(n)| count at least that much."""
        n = self._normed(inputs["x"], inputs["weight"], inputs["eps"])
        tiny = torch.finfo(inputs["x"].dtype).tiny
        sig = torch.sigmoid(n)
        dsilu = sig * (1 + n * (1 - sig))
        u = inputs["u"].to(torch.float64).abs()
        return ((n * sig).abs().clamp_min_(tiny) + n.abs().clamp_min_(tiny) * dsilu.abs()) * u \
            + inputs["r"].to(torch.float64).abs()

    def bytes_moved(self, shape, dtype):
        rows, hidden = shape
        n = rows * hidden * dtype.itemsize
        return 3 * n + hidden * dtype.itemsize, n
