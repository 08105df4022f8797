"""softmax over the last dim of a [rows, cols] tensor: y = exp(x - max) / sum(exp(x - max)).
Compulsory bytes 2·R·C·s (read x once, write y once); how often an implementation really
reads x is what separates the variants:

  three_pass  max, then sum of exp, then write: x read 3 times (4 accesses per element)
  online      running (max, sum) pair rescaled as the max grows (Milakov & Gimelshein):
              x read twice (3 accesses)
  on_chip     the row stays in registers/shared memory: x read once (2 accesses)

A row of all -inf has no defined softmax: the result is NaN, as in PyTorch.
"""
import torch

from harness.registry import Op
from impls._common import pick, randn, rounding_tolerances


class Softmax(Op):
    name = "softmax"
    ndim = 2
    variants = ("three_pass", "online", "on_chip")
    row_op = True
    semantics = "row softmax over the last dim; an all -inf row gives NaN"
    # Outputs are probabilities (<= 1). The exponent carries a rounding error of about
    # |x - max| x u32, which exp turns into a relative error: error_scale says so.
    tolerances = rounding_tolerances(
        roundings=2, fp32_ulps=32, scaled_ulps=4,
        why="output rounding + one intermediate; fp32 exp/div/row-sum ~32 ulp; "
            "exponent rounding 4 ulp x |x-max|")
    adversarial = {
        "large_magnitude": "|x| up to ~3e4: exp overflows unless the row max is subtracted; "
                           "exp2 with log2(e) folded into x (not x - max) loses digits",
        "neg_inf": "masked (-inf) entries, and one all -inf row (NaN)",
    }

    def make_case(self, case, shape, dtype, gen, device):
        rows, cols = shape
        if case == "large_magnitude":
            # fp16's largest finite value is 65504: clamp inside it.
            x = randn(shape, torch.float32, gen, device, std=1e4).clamp(-6e4, 6e4).to(dtype)
        elif case == "neg_inf":
            x = randn(shape, dtype, gen, device)
            x.view(-1)[pick(x.numel(), max(1, x.numel() // 8), gen, device)] = -float("inf")
            x[pick(rows, 1, gen, device)] = -float("inf")
        else:
            x = randn(shape, dtype, gen, device, std=2.0)
        return {"x": x}

    def make_output(self, inputs):
        return torch.empty_like(inputs["x"])

    def reference(self, x):
        x = x.to(torch.float64)
        shifted = x - x.amax(dim=-1, keepdim=True)          # all -inf row: -inf - -inf = NaN
        numerator = shifted.exp()
        return numerator / numerator.sum(dim=-1, keepdim=True)

    def error_scale(self, inputs, ref):
        x = inputs["x"].to(torch.float64)
        distance = (x - x.amax(dim=-1, keepdim=True)).abs().nan_to_num(0.0, 0.0, 0.0)
        return ref.abs().nan_to_num(0.0) * (1.0 + distance)

    def bytes_moved(self, shape, dtype):
        n = shape[0] * shape[1] * dtype.itemsize
        return n, n
