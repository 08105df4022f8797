"""CUDA rows at the longest row rows.cuh takes (MAX_ROW_ELEMENTS, 2^31 - 16 elements), on the
GPU: RMSNorm of one row of MAX and of MAX - 1 elements (MAX - 1: not whole packs on an
aligned row, the kernel that tests each pack's end, (j + 1) * N <= cols, up to the last) in
bf16 and fp32, looped (group 512, each trip), its output NaN-poisoned first, against a float64
reference taken in slices; a row of MAX + 1 is refused before any launch (checked first).

The inputs are random signs (x = ±1, exact in both dtypes) but for the row's last 64 elements,
±2^8: every partial sum of squares is an integer below 2^24 in a thread (2^22 terms each), so
the fp32 sum is right to a few roundings of the last tree levels, the fp32 output to a few units
of 2^-24, and a pack of the tail left out of the sum (2^18 of about 2^31) moves the output by
2^-14, 64 units of the fp32 check's 2^-20. Misplaced, skipped or repeated elements of the
output pass show through the random weights, unwritten ones as NaN. Each case prints one line:
the worst error in units of |ref| (2^-8 bf16, the output's rounding, which hides the tail's
effect on the sum; 2^-20 fp32), at most 2 passing, and the elements left unwritten (none
passing). One informative line follows, not a check: fp32 normal inputs, whose per-thread fp32
sum of 2^22 squares loses the small terms against a running sum near 2^22 (ulp 0.5): the sum
comes out 3.65e-3 low (numpy's sequential fp32 sum, on a CPU), rstd 1.83e-3 high, as measured
on the H200: the accumulation's limit at this length, not an indexing fault.
Exit 1 on any failure. ~40 GiB of GPU memory at most (fp32: x, weight and y of 8 GiB each)."""
import faulthandler
import subprocess
import sys
from pathlib import Path

import torch

from impls._frameworks.cuda import build
from impls._frameworks.cuda.rows import MAX_COLS

SLICE = 1 << 27
TAIL = 64   # the row's last elements, ±2^8: a tail pack left out of the sum shows
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


REFUSAL = f"""
import torch
from impls._frameworks.cuda import build
x = torch.zeros(1, {MAX_COLS} + 1, device="cuda", dtype=torch.bfloat16)
try:
    build.load().rmsnorm(x, x[0], {EPS}, torch.empty_like(x), 512, 512, 0, 1)
except RuntimeError as e:
    print(str(e).splitlines()[0], flush=True)
    raise SystemExit(0 if "2^31 - 16" in str(e) else 2)
raise SystemExit(3)
"""


def refused() -> bool:
    """A row of MAX + 1 elements is refused before any launch, with the limit named; in a child
    process, so that a crash there (this refusal has ended in a segfault on the H200, its error
    unprinted) is reported and the checks below still run."""
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", REFUSAL], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[2])   # -c: the cwd is on sys.path
    ok = proc.returncode == 0
    said = proc.stdout.strip() or proc.stderr.strip()[-1500:]
    print(f"{'ok  ' if ok else 'FAIL'} a row of 2^31 - 15 elements refused (exit {proc.returncode}): {said}", flush=True)
    return ok


def main() -> int:
    faulthandler.enable()   # a crash names its line
    ops = build.load()
    failures = not refused()
    for dtype, unit in ((torch.bfloat16, 2.0 ** -8), (torch.float32, 2.0 ** -20)):
        for cols in (MAX_COLS, MAX_COLS - 1):
            torch.manual_seed(cols)
            x = (torch.randint(0, 2, (1, cols), device="cuda", dtype=torch.int8) * 2 - 1).to(dtype)
            x[0, -TAIL:] *= 2.0 ** 8
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
            if dtype == torch.float32 and cols == MAX_COLS:
                x.normal_()
                ops.rmsnorm(x, w, EPS, y, 512, 512, 0, 1)
                torch.cuda.synchronize()
                worst, _ = reference_error(x, w, y, cols, unit)
                print(f"note rmsnorm float32 1x{cols} normal inputs (not a check): worst {worst * unit:.2e} relative",
                      flush=True)
            del x, w, y
            torch.cuda.empty_cache()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
