"""scale: y = a·x, a an fp32 scalar, the product rounded once into x's dtype.
Moves 2·N·s bytes, like copy: one multiply per element changes nothing on the roof."""
import torch

from harness.registry import Op
from impls._common import randn, rounding_tolerances
from impls.copy import special_values


class Scale(Op):
    name = "scale"
    ndim = 1
    semantics = "y = a·x (a: fp32 scalar, product in fp32, rounded once)"
    tolerances = rounding_tolerances(
        roundings=1, fp32_ulps=1,
        why="a·x in fp32 is one rounding; into bf16/fp16 one more, of the output")
    adversarial = {"special_values": "NaN, ±inf, -0.0 and subnormals pass through the product"}

    def __init__(self, a: float = 0.7, **params):
        super().__init__(a=a, **params)
        # a is defined as an fp32 number, so the float64 reference uses exactly that value.
        self.a = float(torch.tensor(a, dtype=torch.float32))

    def make_case(self, case, shape, dtype, gen, device):
        (n,) = shape
        if case == "special_values":
            x = special_values(n, dtype, gen, device)
            x[x.abs() == torch.finfo(dtype).max] = 1.0   # a·max may overflow: not this op's question
        else:
            x = randn(shape, dtype, gen, device)
        return {"x": x, "a": self.a}

    def make_output(self, inputs):
        return torch.empty_like(inputs["x"])

    def reference(self, x, a):
        return x.to(torch.float64) * a

    def bytes_moved(self, shape, dtype):
        n = shape[0] * dtype.itemsize
        return n, n
