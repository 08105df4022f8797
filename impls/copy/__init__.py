"""copy: y = x. Moves 2·N·s bytes (read x, write y) and computes nothing: the
bandwidth roof itself, and the first thing every framework must get right."""
import torch

from harness.registry import Op
from impls._common import EXACT, randn


def special_values(n, dtype, gen, device):
    """NaN, ±inf, ±0, the largest finite and the smallest subnormal, scattered in noise."""
    x = randn((n,), dtype, gen, device)
    fi = torch.finfo(dtype)
    specials = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, fi.max,
                             -fi.max, fi.smallest_normal * fi.eps], dtype=dtype, device=device)
    idx = torch.randint(0, n, (min(n, 64),), generator=gen, device=device)
    x[idx] = specials[torch.arange(idx.numel(), device=device) % specials.numel()]
    return x


class Copy(Op):
    name = "copy"
    ndim = 1
    semantics = "y = x"
    tolerances = EXACT
    adversarial = {"special_values": "NaN, ±inf, -0.0, subnormals and ±max must come through bit for bit"}

    def make_case(self, case, shape, dtype, gen, device):
        (n,) = shape
        x = special_values(n, dtype, gen, device) if case == "special_values" else randn(shape, dtype, gen, device)
        return {"x": x}

    def make_output(self, inputs):
        return torch.empty_like(inputs["x"])

    def reference(self, x):
        return x.to(torch.float64)

    def bytes_moved(self, shape, dtype):
        n = shape[0] * dtype.itemsize
        return n, n
