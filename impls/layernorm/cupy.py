"""CuPy LayerNorm: y = (x - mean) / sqrt(var + eps) · g + b; 2·R·H·s + 2·H·s bytes.
  idiomatic: ReductionKernels for each row's sum, then its sum of (x - mean)², then an
             ElementwiseKernel: the two-pass statistics, x read three times.
  unsafe:    the same with E[x²] - E[x]² (the two sums in ReductionKernels): the negative
             control the large_mean inputs must fail.
  welford:   the CUDA extension's kernels (layernorm.cuh) through NVRTC: each pack's (count, mean, M2) merged into a running state, the states
             merged in the group's tree (Chan et al.): one pass for the statistics.
  two_pass:  the same kernel's two-pass statistics: the mean, then sum((x - mean)²); the row in registers where it fits."""
import numpy as np

from harness.registry import impl
from impls._frameworks.cupy import idiomatic, rows

_NORMALIZE = "y = st<X>((ld(x) - total / n) * rsqrtf({var} + eps) * ld(g) + ld(b))"


@impl("layernorm", "cupy", variant="idiomatic")
def bind_idiomatic(x, weight, bias, eps, out):
    total = idiomatic.sum_of("ld(x)", "harness_ln_sum")
    deviations = idiomatic.sum_of("(ld(x) - total / n) * (ld(x) - total / n)", "harness_ln_deviations",
                                  params="X x, float32 total, float32 n")
    write = idiomatic.elementwise("X x, float32 total, float32 spread, X g, X b, float32 eps, float32 n", "X y",
                                  _NORMALIZE.format(var="spread / n"), "harness_ln_write")
    eps32, n = np.float32(eps), np.float32(x.shape[1])

    def compute(v, y):
        s = total(v["x"], axis=1, keepdims=True)
        write(v["x"], s, deviations(v["x"], s, n, axis=1, keepdims=True), v["g"], v["b"], eps32, n, y)
    return idiomatic.launcher(compute, {"x": x, "g": weight, "b": bias}, out, "3 ReductionKernels + ElementwiseKernel")


@impl("layernorm", "cupy", variant="unsafe")
def bind_unsafe(x, weight, bias, eps, out):
    total = idiomatic.sum_of("ld(x)", "harness_ln_sum")
    squares = idiomatic.sum_of("ld(x) * ld(x)", "harness_ln_squares")
    write = idiomatic.elementwise("X x, float32 total, float32 squares, X g, X b, float32 eps, float32 n", "X y",
                                  _NORMALIZE.format(var="(squares / n - (total / n) * (total / n))"),
                                  "harness_ln_unsafe_write")
    eps32, n = np.float32(eps), np.float32(x.shape[1])

    def compute(v, y):
        write(v["x"], total(v["x"], axis=1, keepdims=True), squares(v["x"], axis=1, keepdims=True), v["g"], v["b"],
              eps32, n, y)
    return idiomatic.launcher(compute, {"x": x, "g": weight, "b": bias}, out, "2 ReductionKernels + ElementwiseKernel")


def _register(variant: str, code: str):
    @impl("layernorm", "cupy", variant=variant)
    def bind(x, weight, bias, eps, out):
        return rows.row_launcher("layernorm", ("layernorm", variant), f"layernorm {variant}",
                                 f"hk::layernorm_rows<{{T}}, {{P}}, {{TRIP}}, hk::{code}, {{W}}>",
                                 (x, weight, bias, out), (np.float32(eps),), weights=2)
    return bind


for _variant, _code in {"welford": "WELFORD", "two_pass": "TWO_PASS"}.items():
    _register(_variant, _code)
