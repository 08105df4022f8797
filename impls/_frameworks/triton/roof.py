"""Triton's kernels for the roof (harness.measure.roofline): plain streaming kernels, the fastest
ways we know to read N bytes, and to read N and write N. Offered to the roof through
Triton.roof_kernels.

torch's own kernels are timed for the roof beside these (torch.sum and torch.amax for
reads, copy_ for copies), but its reductions are not the fastest read: on the H200 they
read 1 GiB at ~4.27 TB/s where a plain streaming read reads at ~4.40-4.42, and the Triton
and torch.compile sums and maxes timed at 103-104% of a roof from torch's reductions
alone. A roof that ops exceed is no roof, so each roof kernel is the fastest of torch's and
these, in a few shapes, timed alike (roofline.measure). On the H200 the streaming copies
do not beat copy_; they stay candidates for GPUs where they might. (RMSNorm bf16 at
16384x8192 still reads ~100.7% of the copy roof per launch: it moves half the roof's
bytes, so the L2 write-back its single-launch time leaves uncharged weighs twice as much;
its sustained figure, which charges it, is 98.6%.)

Both walk whole tiles of BLOCK elements, tile = pid, pid + P, ... (P programs: a few per
SM, or one per tile), with unmasked 16-byte accesses. The read adds each tile into BLOCK
fp32 lanes, no reduction inside the loop, so many loads are in flight; then one tl.sum
per program into its own slot of a partials buffer (P·4 bytes written: noise against N).
The roof's buffers are whole numbers of tiles (a shape whose tile does not divide them
is not run).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

# (BLOCK, num_warps, programs per SM; 0: one program per tile). One program per tile as well
# as persistent grids: on the H100 the 1-D sums that launch a block per 16 elements a thread
# read at 102% of the best persistent read, and the one-per-tile copy was the fastest copy
# (3033 GB/s, the persistent ones 2868-2871).
READ_SHAPES = ((4096, 8, 8), (8192, 16, 4), (4096, 8, 0))
MIX_SHAPES = ((1024, 4, 0), (2048, 4, 0))
COPY_SHAPES = ((1024, 4, 0), (2048, 4, 0), (4096, 8, 0))


@triton.jit
def _stream_read(src_ptr, partials_ptr, tiles, programs, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    lanes = tl.zeros([BLOCK], tl.float32)
    for tile in range(pid, tiles, programs):
        lanes += tl.load(src_ptr + tl.cast(tile, tl.int64) * BLOCK + tl.arange(0, BLOCK))
    tl.store(partials_ptr + pid, tl.sum(lanes, 0))


@triton.jit
def _stream_mix(a_ptr, b_ptr, c_ptr, d_ptr, tiles, programs, BLOCK: tl.constexpr):
    """d = a + b·c: three reads, one write (the fused chain's mix)."""
    pid = tl.program_id(0)
    for tile in range(pid, tiles, programs):
        offs = tl.cast(tile, tl.int64) * BLOCK + tl.arange(0, BLOCK)
        tl.store(d_ptr + offs, tl.load(a_ptr + offs) + tl.load(b_ptr + offs) * tl.load(c_ptr + offs))


@triton.jit
def _stream_copy(src_ptr, dst_ptr, tiles, programs, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for tile in range(pid, tiles, programs):
        offs = tl.cast(tile, tl.int64) * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst_ptr + offs, tl.load(src_ptr + offs))


def _streams(kind: str, shapes, n: int, sms: int | None, device):
    """(name, block, warps, tiles, programs) of each entry of ``shapes`` whose tile divides
    ``n`` elements: a grid of ``sms`` (default: the GPU's) times its programs per SM, or one
    program per tile."""
    for block, warps, per_sm in shapes:
        if n % block:
            continue
        tiles = n // block
        if per_sm:
            sms = sms or torch.cuda.get_device_properties(device).multi_processor_count
        programs = min(tiles, sms * per_sm) if per_sm else tiles
        yield f"{kind} {block}x{warps}w " + (f"{per_sm}/SM" if per_sm else "1/tile"), block, warps, tiles, programs


def reads(src: torch.Tensor, sms: int | None = None) -> dict[str, callable]:
    """{name: launcher} of the streaming read over ``src`` (fp32, contiguous), one per
    READ_SHAPES entry whose tile divides it (_streams). Each launcher returns the partials
    it wrote."""
    out = {}
    for name, block, warps, tiles, programs in _streams("stream read", READ_SHAPES, src.numel(), sms, src.device):
        partials = torch.empty(programs, dtype=torch.float32, device=src.device)

        def launch(kernel=_stream_read[(programs,)], partials=partials, tiles=tiles, programs=programs,
                   block=block, warps=warps):
            kernel(src, partials, tiles, programs, BLOCK=block, num_warps=warps)
            return partials
        out[name] = launch
    return out


def mixes(src: torch.Tensor, dst: torch.Tensor, sms: int | None = None) -> dict[str, callable]:
    """{name: launcher} of the streaming 3:1 mix: the first three quarters of ``src`` read,
    the last quarter of ``dst`` written (roofline.measure's buffers), one per MIX_SHAPES entry
    whose tile divides a quarter."""
    quarter = src.numel() // 4
    a, b, c, d = src[:quarter], src[quarter:2 * quarter], src[2 * quarter:3 * quarter], dst[3 * quarter:4 * quarter]
    out = {}
    for name, block, warps, tiles, programs in _streams("stream mix", MIX_SHAPES, quarter, sms, src.device):
        def launch(kernel=_stream_mix[(programs,)], tiles=tiles, programs=programs, block=block, warps=warps):
            kernel(a, b, c, d, tiles, programs, BLOCK=block, num_warps=warps)
        out[name] = launch
    return out


def copies(src: torch.Tensor, dst: torch.Tensor, sms: int | None = None) -> dict[str, callable]:
    """{name: launcher} of the streaming copy of ``src`` into ``dst`` (same size, contiguous),
    one per COPY_SHAPES entry whose tile divides them (_streams)."""
    out = {}
    for name, block, warps, tiles, programs in _streams("stream copy", COPY_SHAPES, src.numel(), sms, src.device):
        def launch(kernel=_stream_copy[(programs,)], tiles=tiles, programs=programs, block=block, warps=warps):
            kernel(src, dst, tiles, programs, BLOCK=block, num_warps=warps)
        out[name] = launch
    return out
