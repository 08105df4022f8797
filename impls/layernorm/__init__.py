"""LayerNorm over the last dim: y = (x - mean) / sqrt(var + eps) · g + b, statistics in fp32.
Compulsory bytes 2·R·H·s + 2·H·s (read x, write y, read g and b once).

Variants differ in how the variance is formed:
  welford    running (count, mean, M2) merged pairwise (Chan et al.): stable, one read
  two_pass   mean first, then sum((x - mean)²): stable, reads x twice unless the row is on chip
  unsafe     E[x²] - E[x]² in one pass: cancels catastrophically when |mean| >> std.
             A labelled NEGATIVE CONTROL: the 'large_mean' inputs must make it fail.
"""
import torch

from harness.registry import Op
from impls._common import eps_param, pick, randn, rounding_tolerances


# E[x²] - E[x]² in fp32 errs by ~2^-24·mean² (a few ulps of the sums). In fp32 inputs,
# 10^4 + N(0, 1) leaves a difference of two sums whose ulp is 8: the variance (~1) is lost in
# every row. fp16's and bf16's roundings of 1000 + N(0, 1) cap a row's mean / std, and a row
# passes by luck of the rounding: measured on a CPU over 3000 rows and three orders of
# operations (torch's mean, sequential sums times 1/N, a pairwise tree), 2-14% of fp16 rows
# passed; of bf16 rows 88% at 7 columns (a 1x7 case XPASSed), 66-96% from 13 to 256 (256:
# 96%), 26-50% at 512, at most 28% from 781 to 16384 and 21% from 65536. A case therefore
# draws at least 128 rows below 512 columns, 16 below 32768 and 8 from there (within 2^26
# elements): at the sweeps' row lengths (7, and 781 up) 0.88^128 ~ 8e-8, 0.28^16 ~ 1e-9 and
# 0.21^8 ~ 4e-6 of bf16 cases pass; at 256 columns (in no sweep) 0.964^128 ~ 0.9%.
LARGE_MEAN_ROWS = ((512, 128), (32768, 16), (1 << 62, 8))   # (columns below, rows at least)
LARGE_MEAN_ELEMENTS = 1 << 26


def large_mean_rows(rows: int, hidden: int) -> int:
    least = next(n for below, n in LARGE_MEAN_ROWS if hidden < below)
    return max(rows, min(least, LARGE_MEAN_ELEMENTS // max(hidden, 1)))


class LayerNorm(Op):
    name = "layernorm"
    ndim = 2
    variants = ("welford", "two_pass", "unsafe")
    negative_controls = ("unsafe",)
    row_op = True
    semantics = "y = (x - mean) * rsqrt(var + eps) * g + b (biased variance)"
    # A correct fp32 mean still errs by ~log2(H)·u32 of the row's mean |x|, which x - mean
    # passes on to every element: error_scale is that magnitude, atol 64 ulp of it.
    tolerances = rounding_tolerances(
        roundings=2, fp32_ulps=32, scaled_ulps=64,
        why="output rounding + one intermediate; the mean's own fp32 error (~log2(H) ulp of "
            "|x|) scaled by rstd")
    adversarial = {
        "large_mean": "x = 10^4 + N(0, 1) (fp32; fp16, bf16: 1000 + N(0, 1), at least 128 rows below 512 "
                      "columns, 16 below 32768, 8 from there): E[x²] - E[x]² cancels every digit of the "
                      "variance in fp32",
        "constant_rows": "rows with one repeated value: var = 0, y = b exactly (unsafe: var < 0 -> NaN)",
    }

    def __init__(self, eps: float = 1e-5, **params):
        super().__init__(eps=eps, **params)
        self.eps = eps_param(eps)

    def make_case(self, case, shape, dtype, gen, device):
        rows, hidden = shape
        if case == "large_mean" and dtype == torch.float32:
            x = randn(shape, dtype, gen, device, mean=1e4)
        elif case == "large_mean":
            x = randn((large_mean_rows(rows, hidden), hidden), dtype, gen, device, mean=1000.0)
        else:
            x = randn(shape, dtype, gen, device)
        if case == "constant_rows":
            r = pick(rows, max(1, rows // 4), gen, device)
            x[r] = randn((r.numel(), 1), dtype, gen, device, mean=300.0, std=100.0)
        weight = randn((hidden,), dtype, gen, device, mean=1.0, std=0.1)
        bias = randn((hidden,), dtype, gen, device, std=0.1)
        return {"x": x, "weight": weight, "bias": bias, "eps": self.eps}

    def make_output(self, inputs):
        return torch.empty_like(inputs["x"])

    def reference(self, x, weight, bias, eps):
        x = x.to(torch.float64)
        mean = x.mean(dim=-1, keepdim=True)
        var = (x - mean).square().mean(dim=-1, keepdim=True)
        return (x - mean) * torch.rsqrt(var + eps) * weight.to(torch.float64) + bias.to(torch.float64)

    def error_scale(self, inputs, ref):
        """A correct fp32 mean errs by ~log2(H) ulp of the row's mean |x|; x - mean passes
        that error on, times rstd and g, to every element, however small x - mean is."""
        x = inputs["x"].to(torch.float64)
        mean = x.mean(dim=-1, keepdim=True)
        rstd = torch.rsqrt((x - mean).square().mean(dim=-1, keepdim=True) + inputs["eps"])
        magnitude = (x - mean).abs() + x.abs().mean(dim=-1, keepdim=True)
        return magnitude * rstd * inputs["weight"].to(torch.float64).abs()

    def bytes_moved(self, shape, dtype):
        rows, hidden = shape
        n = rows * hidden * dtype.itemsize
        return n + 2 * hidden * dtype.itemsize, n
