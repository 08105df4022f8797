"""CUDA LayerNorm (layernorm.cu): a group of threads per row, 16-byte packs, the row in
registers where it fits; 2·R·H·s + 2·H·s bytes.
  welford:  each pack's (count, mean, M2) merged into a running state, the states merged in
            the shuffle tree (Chan et al.): one pass for the statistics.
  two_pass: the mean, then sum((x - mean)²).
  unsafe:   E[x²] - E[x]² in one pass: the negative control the large_mean inputs must fail."""
from harness.registry import impl
from impls._frameworks.cuda import build
from impls._frameworks._launch import scratch
from impls._frameworks.cuda.rows import launch_args, row_launcher

VARIANTS = {"welford": 0, "two_pass": 1, "unsafe": 2}


def _register(variant: str, code: int):
    @impl("layernorm", "cuda", variant=variant)
    def bind(x, weight, bias, eps, out):
        ops = build.load()

        def launcher(config, args, rows):
            xs, w, b, y = args
            kernel_args = launch_args(config)
            return lambda: ops.layernorm(xs, w, b, eps, y, code, *kernel_args)
        return row_launcher(("layernorm", variant), f"layernorm {variant}", (x, weight, bias, out),
                            scratch(x.shape[1], x.dtype, x.device, 1, 2), launcher)
    return bind


for _variant, _code in VARIANTS.items():
    _register(_variant, _code)
