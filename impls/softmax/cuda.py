"""CUDA softmax (softmax.cu), a group of threads per row (several rows a block when short),
16-byte packs, exp2 on x - max; 2·R·C·s bytes.
  three_pass: max, sum of exp, output: x read three times (the later reads mostly from L2).
  online:     the (max, sum) pair rescaled as the max grows, merged in the shuffle tree: x
              read twice.
  on_chip:    the row and its exps kept in registers: x read once.
The group (and so the bits) is tuned per row length and dtype, packs and block per batch."""
from harness.registry import impl
from impls._frameworks.cuda import build
from impls._frameworks._launch import scratch
from impls._frameworks.cuda.rows import launch_args, row_launcher

VARIANTS = {"three_pass": 0, "online": 1, "on_chip": 2}


def _register(variant: str, code: int):
    @impl("softmax", "cuda", variant=variant)
    def bind(x, out):
        ops = build.load()

        def launcher(config, args, rows):
            xs, y = args
            kernel_args = launch_args(config)
            return lambda: ops.softmax(xs, y, code, *kernel_args)
        on_chip = variant == "on_chip"
        return row_launcher(("softmax", variant), f"softmax {variant}", (x, out),
                            scratch(x.shape[1], x.dtype, x.device, 1, 0), launcher, kept=on_chip, looped=not on_chip)
    return bind


for _variant, _code in VARIANTS.items():
    _register(_variant, _code)
