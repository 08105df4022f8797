"""CUDA rows at the longest row rows.cuh takes (MAX_ROW_ELEMENTS, 2^31 - 16 elements), on the
GPU: RMSNorm of one row of MAX and of MAX - 1 elements (MAX - 1: not whole packs on an
aligned row, the kernel that tests each pack's end, (j + 1) * N <= cols, up to the last) in
bf16 and fp32, looped (group 512, each trip), its output NaN-poisoned first, against a float64
reference taken in slices; a row of MAX + 1 is refused before any launch. Each case prints
one line: the worst error in units of |ref| (bf16 2^-8, the output's rounding; fp32 2^-12: the
fp32 sum of squares over 2^22 terms a thread, its rounding about sqrt(2^22) · 2^-24 = 2^-13 of
it), at most 2 passing, and the elements left unwritten (none passing). Exit 1 on any failure. ~40 GiB of GPU memory at
most (fp32: x, weight and y of 8 GiB each)."""
import sys

import torch

from impls._frameworks.cuda import build
from impls._frameworks.cuda.rows import MAX_COLS

SLICE = 1 << 27
EPS = 1e-6


def reference_error(x, w, y, cols, unit):
    """(worst |y - ref| / (unit · |ref| + unit · 2^-10), NaNs in y) over the row, ref in float64."""
    squares = sum(x[0, s:s + SLICE].double().square().sum() for s in range(0, cols, SLICE))
    rstd = torch.rsqrt(squares / cols + EPS)
    worst, unwritten = 0.0, 0
    for s in range(0, cols, SLICE):
        ref = x[0, s:s + SLICE].double() * rstd * w[s:s + SLICE].double()
        got = y[0, s:s + SLICE].double()
        unwritten += int(torch.isnan(got).sum())
        err = ((got - ref).abs() / (unit * ref.abs() + unit * 2 ** -10)).nan_to_num(0.0).max()
        worst = max(worst, float(err))
    return worst, unwritten


def main() -> int:
    ops = build.load()
    failures = 0
    for dtype, unit in ((torch.bfloat16, 2.0 ** -8), (torch.float32, 2.0 ** -12)):
        for cols in (MAX_COLS, MAX_COLS - 1):
            torch.manual_seed(cols)
            x = torch.randn(1, cols, device="cuda", dtype=dtype)
            w = torch.randn(cols, device="cuda", dtype=dtype)
            y = torch.full_like(x, float("nan"))
            for trip in (1, 2, 4):
                y.fill_(float("nan"))
                ops.rmsnorm(x, w, EPS, y, 512, 512, 0, trip)
                torch.cuda.synchronize()
                worst, unwritten = reference_error(x, w, y, cols, unit)
                ok = worst <= 2 and unwritten == 0
                failures += not ok
                print(f"{'ok  ' if ok else 'FAIL'} rmsnorm {str(dtype).removeprefix('torch.')} 1x{cols} trip {trip}: "
                      f"worst {worst:.3f} units, {unwritten} unwritten", flush=True)
            del x, w, y
            torch.cuda.empty_cache()
    x = torch.zeros(1, MAX_COLS + 1, device="cuda", dtype=torch.bfloat16)
    try:
        ops.rmsnorm(x, x[0], EPS, torch.empty_like(x), 512, 512, 0, 1)
        print("FAIL a row of 2^31 - 15 elements launched")
        failures += 1
    except RuntimeError as e:
        ok = "2^31 - 16" in str(e)
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} a row of 2^31 - 15 elements refused: {str(e).splitlines()[0]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
