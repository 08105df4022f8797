# r50 (H200): this script as it ran, at f526ad3 (HINTS had "keep" then; it is gone since 70668fb), under
# ncu --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum -k regex:_copy
# (output: 2026-11-30-h200-r50-ncu-copy.txt; each size's four launches: plain, keep, plain, keep).
"""ncu target: the Triton copy kernel at 64 MiB and 256 MiB, plain and keep (evict_last stores)."""
import sys, torch
sys.path.insert(0, ".")
from impls._frameworks.triton import HINTS, bound_launch
from impls.copy.triton import _copy
for mib in (64, 256):
    n = (mib << 20) // 4
    x = torch.randn(n, device="cuda"); y = torch.empty_like(x)
    for h in ("plain", "keep", "plain", "keep"):
        bound_launch(_copy, (n // 4096,), x, y, n, BLOCK=4096, num_warps=8, **HINTS[h])()
    torch.cuda.synchronize()
    print(mib, "MiB order: plain keep plain keep")
