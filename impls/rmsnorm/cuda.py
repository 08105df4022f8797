"""CUDA RMSNorm (rmsnorm.cu): y = x · rsqrt(mean(x²) + eps) · g; 2·R·H·s + H·s bytes.
  naive: the seed's kernel, one block of 256 threads a row, scalar loads, x read again from
         L2 to scale: few bytes in flight per thread.
  tuned: a group of threads per row sized to the row (several rows a block when
         short), 16-byte packs, the row kept in registers where it fits (x read once);
         group, packs and block chosen by the tuner per row length and dtype."""
from harness.registry import impl
from impls._frameworks._launch import configured, scratch
from impls._frameworks.cuda import build
from impls._frameworks.cuda.rows import launch_args, row_launcher


@impl("rmsnorm", "cuda", variant="naive")
def bind_naive(x, weight, eps, out):
    ops = build.load()
    return configured(lambda: ops.rmsnorm_seed(x, weight, eps, out), {"threads": 256, "rows_per_block": 1})


@impl("rmsnorm", "cuda", variant="tuned")
def bind_tuned(x, weight, eps, out):
    ops = build.load()

    def bind(config, args, rows):
        xs, w, y = args
        kernel_args = launch_args(config)
        return lambda: ops.rmsnorm(xs, w, eps, y, *kernel_args)
    return row_launcher(("rmsnorm", "tuned"), "rmsnorm", (x, weight, out),
                        scratch(x.shape[1], x.dtype, x.device, 1, 1), bind)
