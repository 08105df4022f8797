"""A read-only stream for the roof (roofline): the fastest way we know to read N bytes.

torch's reductions (torch.sum, torch.amax) are the roof's other read kernels, but on the
H200 they read 1 GiB at ~4.27 TB/s where a plain streaming kernel reads at ~4.42 (r73: the
Triton and torch.compile sums and maxes timed at 103-104% of a roof from torch's
reductions alone). A roof that ops exceed is no roof, so the read roof is the fastest of
torch's reductions and this kernel in a few shapes.

The kernel: a persistent grid, each program adding whole tiles (pid, pid + P, ...) into
BLOCK fp32 lanes with unmasked 16-byte loads and no reduction inside the loop, so many
loads are in flight; one tl.sum per program into its own slot of a partials buffer (P·4
bytes written: noise against N). The ragged end (N not a multiple of BLOCK) is left unread:
the roof's buffers are sized in whole tiles.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

# (BLOCK, num_warps, programs per SM): around the 1-D reductions' fixed config (4096, 8, 8).
SHAPES = ((4096, 8, 8), (8192, 16, 4), (2048, 4, 16))


@triton.jit
def _stream_read(src_ptr, partials_ptr, tiles, programs, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    lanes = tl.zeros([BLOCK], tl.float32)
    for tile in range(pid, tiles, programs):
        lanes += tl.load(src_ptr + tl.cast(tile, tl.int64) * BLOCK + tl.arange(0, BLOCK))
    tl.store(partials_ptr + pid, tl.sum(lanes, 0))


def launches(src: torch.Tensor, sms: int | None = None) -> dict[str, callable]:
    """{name: launcher} of the stream over ``src`` (fp32, contiguous), one per SHAPES entry
    whose tile divides it, on a grid of ``sms`` (default: the GPU's) times its programs per
    SM. Each launcher returns the partials buffer it wrote."""
    sms = sms or torch.cuda.get_device_properties(src.device).multi_processor_count
    out = {}
    for block, warps, per_sm in SHAPES:
        if src.numel() % block:
            continue
        programs = sms * per_sm
        partials = torch.empty(programs, dtype=torch.float32, device=src.device)
        kernel = _stream_read[(programs,)]

        def launch(kernel=kernel, partials=partials, programs=programs, block=block, warps=warps):
            kernel(src, partials, src.numel() // block, programs, BLOCK=block, num_warps=warps)
            return partials
        out[f"stream {block}x{warps}w {per_sm}/SM"] = launch
    return out
