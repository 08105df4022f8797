"""CUDA chain y = silu(rmsnorm(x; g)) · u + r (rmsnorm_silu_mul_add.cu).
  fused:   one kernel: the row's statistics, then silu(n)·u + r per element, rounded once:
           4·R·H·s + H·s bytes.
  unfused: the tuned CUDA RMSNorm, then silu, mul and add as elementwise kernels, each
           intermediate rounded to the dtype, written and read back (~10·R·H·s bytes)."""
import torch

from harness.registry import impl
from impls._frameworks._launch import configured, scratch
from impls._frameworks.cuda import build
from impls._frameworks.cuda.launch import blocks_for, chosen, with_grid
from impls._frameworks.cuda.rows import launch_args, row_launcher
from impls.rmsnorm.cuda import bind_tuned as rmsnorm_tuned

SILU, MUL, ADD = 0, 1, 2
STEPS = {SILU: "silu", MUL: "mul", ADD: "add"}   # the unfused steps' kernels, as the config tables name them


@impl("rmsnorm_silu_mul_add", "cuda", variant="fused")
def bind_fused(x, weight, u, r, eps, out):
    ops = build.load()

    def bind(config, args, rows):
        xs, w, us, rs, y = args
        kernel_args = launch_args(config)
        return lambda: ops.rmsnorm_silu_mul_add(xs, w, us, rs, eps, y, *kernel_args)
    return row_launcher(("rmsnorm_silu_mul_add", "fused"), "rmsnorm_silu_mul_add fused", (x, weight, u, r, out),
                        scratch(x.shape[1], x.dtype, x.device, 3, 1), bind)


@impl("rmsnorm_silu_mul_add", "cuda", variant="unfused")
def bind_unfused(x, weight, u, r, eps, out):
    ops = build.load()
    normed, activated, product = (torch.empty_like(x) for _ in range(3))
    norm = rmsnorm_tuned(x, weight, eps, normed)

    def step(code, a, b, y):
        def make(config):
            blocks = blocks_for(a.numel(), a.element_size(), config, a.device)
            return with_grid(lambda: ops.rmsnorm_silu_mul_add_step(a, b, y, code, config["threads"], blocks),
                             blocks=blocks)
        return chosen(f"rmsnorm_silu_mul_add {STEPS[code]}", a.numel(), a.dtype, make, a.device)
    silu, mul, add = step(SILU, normed, normed, activated), step(MUL, activated, u, product), step(ADD, product, r, out)

    def launch():
        norm()
        silu()
        mul()
        add()
    return configured(launch, {"rmsnorm": norm.config, "silu": silu.config, "mul": mul.config, "add": add.config})
