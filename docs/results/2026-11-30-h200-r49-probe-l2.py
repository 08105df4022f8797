# r49 (H200): this script as it ran, from an untracked copy in the checkout of 89f62b9 (python3 tmpprobe/l2.py;
# output: 2026-11-30-h200-r49-probe-l2.txt). It adds hint sets to HINTS at run time and times its own
# copy kernel with a store eviction policy (SEV): what led to the keep hint of f526ad3 (taken back in 70668fb).
"""Probe: does keeping the output in L2 (evict_first loads) change a 64 MiB LayerNorm?"""
import sys, torch, triton, triton.language as tl
sys.path.insert(0, ".")
from harness.timing import CudaTimer, TimingBudget
from impls._frameworks import triton as T
from impls._frameworks.triton import row_launcher, bound_launch
from impls.layernorm.triton import _layernorm

T.HINTS.update({"ef": {"LOAD": "evict_first", "STORE": ""}, "cs": {"LOAD": "", "STORE": ".cs"},
                "el": {"LOAD": "evict_last", "STORE": ""}})
dev = torch.device("cuda")
timer = CudaTimer(dev)
budget = TimingBudget()

@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr, LOAD: tl.constexpr, STORE: tl.constexpr, SEV: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, eviction_policy=LOAD), cache_modifier=STORE, eviction_policy=SEV)

def t(launch):
    return timer.time(launch, budget, 1 << 30)

combos = [("", "", ""), ("evict_first", "", ""), ("evict_first", ".cs", ""), ("", ".cs", ""),
          ("", "", "evict_last"), ("evict_first", "", "evict_last")]
for mib in (32, 64, 256):
    n = (mib << 20) // 4
    x = torch.randn(n, device=dev); y = torch.empty_like(x)
    for rnd in range(2):
        line = []
        for lo, st, sev in combos:
            m = t(bound_launch(_copy, (n // 4096,), x, y, n, BLOCK=4096, LOAD=lo, STORE=st, SEV=sev, num_warps=8))
            line.append(f"{lo or '-'}/{st or '-'}/{sev or '-'} {m.median_us:7.2f}")
        print(f"copy fp32 {mib} MiB r{rnd}: " + " | ".join(line))
    del x, y

from liger_kernel.ops.layer_norm import layer_norm_forward
for dtype in (torch.float32, torch.bfloat16):
    cols = 4096
    for rows in ((2048, 4096, 16384) if dtype == torch.float32 else (4096, 8192, 32768)):
        x = torch.randn(rows, cols, device=dev).to(dtype)
        g = (1 + 0.1 * torch.randn(cols, device=dev)).to(dtype)
        b = (0.1 * torch.randn(cols, device=dev)).to(dtype)
        y = torch.empty_like(x)
        shapes = [(1, 16, 0), (1, 8, 0), (1, 16, 2048)] if dtype == torch.float32 else [(1, 8, 0), (1, 4, 0), (2, 8, 0)]
        launches = {"liger": lambda: layer_norm_forward(x, g, b, 1e-5)[0]}
        for r, w, lb in shapes:
            for h in ("plain", "ef", "cs", "stream"):
                cfg = dict(rows=r, num_warps=w, persistent=False, hints=h, loop_block=lb, prefetch=False, early=False,
                           ordered=False, reload=False)
                launches[f"{r}x{w} L{lb} {h}"] = row_launcher(_layernorm, cfg, rows, dev, x, g, b, y, rows, cols, 1e-5,
                                                             VARIANT=1, BLOCK=4096, ON_CHIP=True, EVEN=True, GROUP=16 // x.element_size())
        res = {k: [] for k in launches}
        for rnd in range(2):
            for k, l in launches.items():
                res[k].append(t(l).median_us)
        print(f"== layernorm two_pass {dtype} {rows}x{cols}")
        for k, v in res.items():
            print(f"  {k:22s} " + " ".join(f"{m:7.2f}" for m in v))
        del x, y
