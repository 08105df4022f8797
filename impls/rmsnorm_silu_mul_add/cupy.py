"""CuPy chain y = silu(rmsnorm(x; g)) · u + r.
  idiomatic: a ReductionKernel for each row's sum of squares, then one ElementwiseKernel for
             the rest (CuPy fuses what a user writes in one kernel body): x read twice.
  fused:     the CUDA extension's fused kernel (rmsnorm_silu_mul_add.cuh) through NVRTC: the
             row's statistics, then silu(n)·u + r per element, rounded once:
             4·R·H·s + H·s bytes.
  unfused:   the tuned RMSNorm, then the extension's silu, mul and add steps (chain_step), each
             intermediate rounded to the dtype, written and read back (~10·R·H·s bytes)."""
import numpy as np
import torch

from harness.registry import impl
from impls._frameworks._launch import configured
from impls._frameworks.cuda.launch import blocks_for
from impls._frameworks.cupy import idiomatic, interop, kernels, launch, rows
from impls.rmsnorm.cupy import bind_tuned as rmsnorm_tuned


@impl("rmsnorm_silu_mul_add", "cupy", variant="idiomatic")
def bind_idiomatic(x, weight, u, r, eps, out):
    squares = idiomatic.sum_of("ld(x) * ld(x)", "harness_rms_squares")
    chain = idiomatic.elementwise(
        "X x, float32 squares, X g, X u, X r, float32 eps, float32 n", "X y",
        "const float normed = ld(x) * rsqrtf(squares / n + eps) * ld(g);"
        "y = st<X>(silu(normed) * ld(u) + ld(r))", "harness_chain")
    eps32, n = np.float32(eps), np.float32(x.shape[1])

    def compute(v, y):
        chain(v["x"], squares(v["x"], axis=1, keepdims=True), v["g"], v["u"], v["r"], eps32, n, y)
    return idiomatic.launcher(compute, {"x": x, "g": weight, "u": u, "r": r}, out,
                              "ReductionKernel + ElementwiseKernel")


@impl("rmsnorm_silu_mul_add", "cupy", variant="fused")
def bind_fused(x, weight, u, r, eps, out):
    return rows.row_launcher("rmsnorm_silu_mul_add", ("rmsnorm_silu_mul_add", "fused"), "rmsnorm_silu_mul_add fused",
                             "hk::chain_rows<{T}, {P}, {TRIP}, {W}>", (x, weight, u, r, out), (np.float32(eps),),
                             weights=1)


def _step(code: str, a: torch.Tensor, b: torch.Tensor, y: torch.Tensor):
    """The launcher of chain_step ``code`` (SILU, MUL, ADD: rmsnorm_silu_mul_add.cuh):
    y = silu(a), a·b or a + b, one element at a time on a grid-stride loop."""
    name = f"hk::chain_step<{kernels.TYPES[a.dtype]}, hk::{code}>"
    kernel = kernels.functions("rmsnorm_silu_mul_add", [name])[name]
    args = (*interop.views(a, b, y), launch.i64(a.numel()))

    def make(config):
        return launch.raw_launcher(kernel, blocks_for(a.numel(), a.element_size(), config, a.device),
                                   config["threads"], args)
    return launch.chosen(f"rmsnorm_silu_mul_add {code.lower()}", a.numel(), a.dtype, make, a.device)


@impl("rmsnorm_silu_mul_add", "cupy", variant="unfused")
def bind_unfused(x, weight, u, r, eps, out):
    normed, activated, product = (torch.empty_like(x) for _ in range(3))
    norm = rmsnorm_tuned(x, weight, eps, normed)
    silu, mul, add = _step("SILU", normed, normed, activated), _step("MUL", activated, u, product), \
        _step("ADD", product, r, out)

    def run():
        norm()
        silu()
        mul()
        add()
    run.scratch = (normed, activated, product)
    return configured(run, {"rmsnorm": norm.config, "silu": silu.config, "mul": mul.config, "add": add.config})
