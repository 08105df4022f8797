"""CuPy RMSNorm: y = x · rsqrt(mean(x²) + eps) · g; 2·R·H·s + H·s bytes.
  idiomatic: a ReductionKernel for each row's sum of squares (fp32), then an ElementwiseKernel
             broadcasting it over the row: x read twice, CuPy's scalar loads.
  tuned:     the CUDA extension's tuned kernel (rmsnorm.cuh) through NVRTC: a group of threads per row sized to the row (several rows a block when
             short), 16-byte packs, the row kept in registers where it fits (x read once);
             group, packs and block chosen by the tuner per row length and dtype."""
import numpy as np

from harness.registry import impl
from impls._frameworks.cupy import idiomatic, rows


@impl("rmsnorm", "cupy", variant="idiomatic")
def bind_idiomatic(x, weight, eps, out):
    squares = idiomatic.sum_of("ld(x) * ld(x)", "harness_rms_squares")
    scale = idiomatic.elementwise("X x, float32 squares, X g, float32 eps, float32 n", "X y",
                                  "y = st<X>(ld(x) * rsqrtf(squares / n + eps) * ld(g))", "harness_rms_scale")
    eps32, n = np.float32(eps), np.float32(x.shape[1])

    def compute(v, y):
        scale(v["x"], squares(v["x"], axis=1, keepdims=True), v["g"], eps32, n, y)
    return idiomatic.launcher(compute, {"x": x, "g": weight}, out, "ReductionKernel + ElementwiseKernel")


@impl("rmsnorm", "cupy", variant="tuned")
def bind_tuned(x, weight, eps, out):
    return rows.row_launcher("rmsnorm", ("rmsnorm", "tuned"), "rmsnorm", "hk::rmsnorm_rows<{T}, {P}, {TRIP}, {W}>",
                             (x, weight, out), (np.float32(eps),), weights=1)
