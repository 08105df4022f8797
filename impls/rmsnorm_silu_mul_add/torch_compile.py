"""torch.compile of the eager chain: Inductor fuses the pointwise tail into the norm."""
from harness.registry import impl
from impls._frameworks.torch_compile import compiled, rows_dynamic
from impls.rmsnorm_silu_mul_add.eager import chain


@impl("rmsnorm_silu_mul_add", "torch_compile", variant="fused")
def bind(x, weight, u, r, eps, out):
    rows_dynamic(x, u, r)
    fn = compiled(chain)
    return lambda: fn(x, weight, u, r, eps)
