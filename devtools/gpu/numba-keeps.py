"""On a GPU: each Numba row kernel's keeps (rows.keep: the row kept in registers, cached in
shared memory, read again) give the same bits for the same group, as the simulator's test
(tests/test_numba_sim.py) checks on small rows: here the compiled kernels, where NVVM and
ptxas could schedule or contract each kernel's arithmetic its own way. Rows of 4096 columns
(whole, aligned) and 4100 (misaligned by one element: the kernels for any rows), random and
adversarial inputs, bf16, fp16 and fp32 (or the dtypes named). Prints a line per case; exits
1 on any difference.

    python3 devtools/gpu/numba-keeps.py [bfloat16 float16 float32]"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from harness import registry  # noqa: E402

DEVICE = torch.device("cuda:0")
FRAMEWORK = registry.frameworks()["numba"]
FRAMEWORK.prepare(DEVICE)
from impls._frameworks.numba import rows  # noqa: E402

ROW_KEYS = [("rmsnorm", registry.NO_VARIANT), ("layernorm", "welford"), ("layernorm", "two_pass"),
            ("softmax", "three_pass"), ("softmax", "online"), ("softmax", "on_chip"), ("rmsnorm_silu_mul_add", "fused")]


def misaligned(t: torch.Tensor, offset: int) -> torch.Tensor:
    buf = torch.empty(t.numel() + offset, dtype=t.dtype, device=t.device)
    view = buf[offset:].view(t.shape)
    view.copy_(t)
    return view


def main() -> int:
    bad = 0
    rows.SIMULATED = True      # row_launcher then takes rows.sim_config (patched below) and does not tune
    for op_name, variant in ROW_KEYS:
        registry.load_impls(op_name, ["numba"])
        op = registry.ops()[op_name]()
        bind = registry.registered()[(op_name, "numba", variant)].bind
        for dtype in [getattr(torch, name) for name in sys.argv[1:] or ("bfloat16", "float16", "float32")]:
            size = torch.empty(0, dtype=dtype).element_size()
            for cols, offset in ((4096, 0), (4100, 1)):
                group = 1
                while not rows.shape(group, cols, True, size)["kept"]:
                    group *= 2
                keeps = {"on_chip": ("kept", "cached"), "three_pass": ("kept", "read"),
                         "online": ("kept", "read")}.get(variant, ("kept", "cached", "read"))
                for case in ["random", *op.adversarial]:
                    inputs = op.inputs((67, cols), dtype, DEVICE, seed=cols + len(case), case=case)
                    moved = {k: misaligned(v, offset) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
                    outs = {}
                    for keep in keeps:
                        def config(n, cacheable, itemsize, keep=keep):
                            c = rows.shape(group, n, cacheable, itemsize, threads=max(group, 256))
                            c = {**c, "kept": keep == "kept", "cached": keep == "cached"}
                            if c["cached"] and rows.cache_bytes(c, n) > rows.SHARED_LIMIT:
                                c["threads"] = group
                            return c
                        rows.sim_config = config
                        out = misaligned(op.make_output(moved), offset)
                        launch = bind(**moved, out=out)
                        launch()
                        torch.cuda.synchronize()
                        outs[keep] = out.clone()
                    same = all(torch.equal(o.view(torch.uint8), outs["kept"].view(torch.uint8)) for o in outs.values())
                    bad += not same
                    print(f"{'ok  ' if same else 'DIFF'} {op_name} {variant} {str(dtype)[6:]} {cols} columns, "
                          f"{case}, group {group}: {' '.join(keeps)}", flush=True)
    print(f"{bad} case(s) where a keep changed bits")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
