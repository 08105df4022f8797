# r67 (H200): this script as it ran, under
#   ncu --clock-control none --cache-control all -k "regex:layernorm|layer_norm"
#       --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active
# (output: 2026-12-01-h200-r67-ncu-ln.txt). LayerNorm two_pass fp32 4096x4096 on one set of
# tensors, three rounds of: ours as the tuner launches the 4096-row batch (one row on 16
# warps), ours on 8 warps with g and b early (other bits), Liger's forward kernel (8 warps).
# The question: how much of each kernel's 64 MiB output is still in L2, unwritten, at its
# end (the harness's timing does not charge that write-back, r50).
"""ncu target: our LayerNorm rows and Liger's kernel at 4096x4096 fp32."""
import sys

import torch

sys.path.insert(0, ".")
import importlib.util  # noqa: E402
from importlib.machinery import SourceFileLoader  # noqa: E402

spec = importlib.util.spec_from_loader("probe_small", SourceFileLoader("probe_small", "scripts/probe-small"))
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)
rows = cols = 4096
dev = torch.device("cuda")
x = torch.randn(rows, cols, device=dev)
g = 1 + 0.1 * torch.randn(cols, device=dev)
b = 0.1 * torch.randn(cols, device=dev)
y = torch.empty_like(x)
launches = {"ours 1x16": probe.ours_layernorm({"num_warps": 16}, x, g, b, y),
            "ours 1x8 early": probe.ours_layernorm({"num_warps": 8, "early": True}, x, g, b, y),
            "liger 8w": probe.liger_layernorm_kernel(x, g, b, y, 8)}
for r in range(3):
    for name, launch in launches.items():
        launch()
        torch.cuda.synchronize()
        print(f"round {r}: {name}", flush=True)
