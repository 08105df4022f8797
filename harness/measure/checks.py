"""Correctness, determinism and batch invariance of one bound implementation.

Correctness: the float64 reference is computed from the *same* low-precision inputs, the
output is poisoned with NaN before the checked launch (an element the kernel never wrote
stays NaN and fails), and an element passes when

    |out - ref| <= rtol * |ref| + atol * scale + floor

with (rtol, atol) from the op's tolerance table, ``scale`` from the op (1, or the size of
the terms that cancel), and ``floor`` the spacing of the output dtype's subnormals. NaN
must meet NaN and ±inf must meet the same ±inf.

Determinism: K launches on the same inputs; the number of distinct bit patterns and the
largest distance in ulps between any two runs, element by element.

Batch invariance (row ops): the first b rows, bound and launched as a batch of b, must
give the same bits as those rows in the full batch.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch

from harness.registry import Tol


@dataclass
class CheckResult:
    case: str
    seed: int
    passed: bool
    n_bad: int
    numel: int
    max_abs_err: float | None
    max_rel_err: float | None
    tol_used: float | None       # worst |err| / allowed; <= 1 passes
    detail: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def result_of(launch, out: torch.Tensor) -> torch.Tensor:
    """Run the launcher; its output is what it returns, or else the ``out`` it wrote."""
    got = launch()
    return out if got is None else got


def poison_bits(dtype: torch.dtype) -> int:
    """The poison: a quiet NaN with a payload (fp32 0x7FDA5A5A, bf16 0x7FDA, fp16 0x7E5A),
    so that an element left as the poison is told apart from a NaN the kernel wrote
    (arithmetic gives the canonical NaN; an input's NaN keeps its own payload). A plain NaN
    poison let a kernel that skips the rows whose answer is NaN (an all -inf softmax row)
    pass: right only where the output held NaN before."""
    inf = int(torch.tensor(float("inf"), dtype=dtype).view(_INT[dtype.itemsize]))
    quiet = 1 << (round(-math.log2(torch.finfo(dtype).eps)) - 1)   # the top mantissa bit
    return inf | quiet | (0x5A5A5A5A5A5A5A5A & (quiet - 1))


def poison(out: torch.Tensor) -> None:
    if out.is_floating_point():
        bits_view(out).fill_(poison_bits(out.dtype))


def poisoned(t: torch.Tensor) -> torch.Tensor:
    """Where ``t`` still holds the poison's bits (all False for a non-float tensor)."""
    if not t.is_floating_point():
        return torch.zeros(t.shape, dtype=torch.bool, device=t.device)
    return raw_bits(t.detach()) == poison_bits(t.dtype)


def checked_launch(op, launch, inputs: dict, out: torch.Tensor, dtype: torch.dtype, case: str, seed: int,
                   sync, poisoned_first: bool = True) -> tuple[CheckResult, torch.Tensor]:
    """One checked launch: the output poisoned (unless ``poisoned_first`` is False), the
    launcher run and waited for (``sync``), its result compared against the op's float64
    reference of ``inputs``. (result, output)."""
    if poisoned_first:
        poison(out)
    got = result_of(launch, out)
    sync()
    ref = op.reference(**inputs)
    return compare(got, ref, op.tolerance(dtype), op.error_scale(inputs, ref), case, seed), got


def compare(got: torch.Tensor, ref: torch.Tensor, tol: Tol, scale, case: str, seed: int) -> CheckResult:
    if got.numel() != ref.numel():
        return CheckResult(case, seed, False, ref.numel(), ref.numel(), None, None, None,
                           f"output has {got.numel()} elements {list(got.shape)}, "
                           f"expected {ref.numel()} {list(ref.shape)}")
    fi = torch.finfo(got.dtype) if got.is_floating_point() else None
    floor = fi.smallest_normal * fi.eps if fi else 0.0
    # Each line below is a pass over float64 tensors the size of the output (1 GiB at
    # 32768x4096), nine checks a case: in place where a temporary is not read again.
    out = got.detach().reshape(ref.shape).to(torch.float64)
    ref = ref.to(out.device)
    finite = torch.isfinite(ref) & torch.isfinite(out)
    err = (out - ref).abs_()
    if isinstance(scale, torch.Tensor):
        scale = scale.to(out.device).reshape(ref.shape) if scale.numel() > 1 else scale.to(out.device)
    size = ref.abs()
    allowed = size * tol.rtol
    allowed += tol.atol * scale
    allowed += floor
    ok = (err <= allowed) & finite
    if not bool(finite.all()):   # NaN meets NaN, and +-inf the same +-inf
        ok |= torch.isnan(ref) & torch.isnan(out)
        ok |= torch.isinf(ref) & (out == ref)
    left = poisoned(got).reshape(ref.shape).to(ok.device)
    ok &= ~left
    n_bad = ok.numel() - int(ok.sum())
    err.masked_fill_(~finite, 0.0)   # from here |error| where both are finite, else 0
    max_abs = float(err.max()) if err.numel() else 0.0
    rel = (err / size).masked_fill_(~finite | (ref == 0), 0.0)
    max_rel = float(rel.max()) if rel.numel() else 0.0
    del rel, size
    ratio = (err / allowed.clamp_min(1e-300)).masked_fill_(~finite | (allowed <= 0), 0.0)
    tol_used = float(ratio.max()) if ratio.numel() else 0.0
    del ratio
    detail = ""
    if n_bad:
        first = int((~ok).reshape(-1).nonzero()[0])
        at_first = lambda t: t.reshape(-1)[first]  # noqa: E731  (one element, five tensors)
        nan_ref = torch.isnan(ref)
        unwritten = int((torch.isnan(out) & ~nan_ref).sum())
        got_v, want_v = float(at_first(out)), float(at_first(ref))
        # The band at that element, not just rtol and atol: atol is scaled by the op's
        # per-element size of the cancelling terms, which can be far below 1 (an allowed
        # band of ~4e-45 where 'atol 1.91e-06' alone reads as a wide one).
        detail = (f"{n_bad} of {ref.numel()} elements outside tolerance (rtol {tol.rtol:.3g}, "
                  f"atol {tol.atol:.3g}); first at flat index {first}: got {got_v!r}, "
                  f"want {want_v!r}")
        if bool(at_first(finite)):
            detail += f" (|error| {float(at_first(err)):.3g}, allowed {float(at_first(allowed)):.3g})"
        if fi and got_v == 0.0 and want_v != 0.0 and abs(want_v) < fi.smallest_normal:
            detail += (f"; the exact result is subnormal in {str(got.dtype).removeprefix('torch.')} "
                       f"and the impl gave 0 (subnormals flushed to zero, or an intermediate underflowed)")
        if unwritten:
            detail += f"; {unwritten} NaN where a number was due (unwritten or NaN-producing)"
        hidden = int((left & nan_ref).sum())
        if hidden:
            detail += (f"; {hidden} element(s) whose answer is NaN left as the poison (never "
                       f"written: right only because the output held NaN before)")
    return CheckResult(case, seed, n_bad == 0, n_bad, ref.numel(), max_abs, max_rel, tol_used, detail)


_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bits_view(t: torch.Tensor) -> torch.Tensor:
    """``t``'s bits as integers of its element size: a view of its memory, not a copy."""
    return t.view(_INT[t.element_size()])


def raw_bits(t: torch.Tensor) -> torch.Tensor:
    return bits_view(t.contiguous())


def ordered_bits(t: torch.Tensor) -> torch.Tensor:
    """Float bits as integers whose order is the floats' order (ulp distance = difference)."""
    i = raw_bits(t).to(torch.int64)
    sign_mask = (1 << (8 * t.element_size() - 1)) - 1
    return torch.where(i < 0, -(i & sign_mask), i)


@dataclass
class Determinism:
    runs: int
    n_distinct: int
    max_ulp_spread: int
    first: torch.Tensor | None = field(default=None, repr=False)   # the first launch's result, a copy

    @property
    def deterministic(self) -> bool:
        return self.n_distinct == 1


def determinism(launch, out: torch.Tensor, runs: int, keep: int = 8) -> Determinism:
    """Launch ``runs`` times on unchanged inputs and compare the bits of every result."""
    first = result_of(launch, out).detach().clone()
    lo = hi = ordered_bits(first)
    distinct = [first]
    extra = 0
    for _ in range(runs - 1):
        res = result_of(launch, out).detach()
        bits = ordered_bits(res)
        lo, hi = torch.minimum(lo, bits), torch.maximum(hi, bits)
        if not any(torch.equal(raw_bits(res), raw_bits(d)) for d in distinct):
            if len(distinct) < keep:
                distinct.append(res.clone())
            else:
                extra += 1   # counted, not kept: may count a repeat of an unkept pattern
    spread = int((hi - lo).max()) if lo.numel() else 0
    return Determinism(runs, len(distinct) + extra, spread, first)


def batch_sizes(rows: int) -> list[int]:
    """Sub-batch sizes for batch invariance: a single row and a ragged part of the batch."""
    return sorted({b for b in (1, rows // 2 + 1) if b < rows})


def batch_invariance(op, bind, inputs: dict, out: torch.Tensor, full: torch.Tensor,
                     sizes: list[int]) -> tuple[bool, str]:
    """Rows 0..b-1 launched as a batch of b must match the full batch's rows bit for bit."""
    full_bits = raw_bits(full.detach().reshape(out.shape))
    differing = []
    for b in sizes:
        sub_inputs, sub_out = op.rows(inputs, out, b)
        # Copies, not views into the full batch: from a view an impl could reach the whole
        # batch (its storage) and give the full batch's bits, whatever the batch it is shown.
        sub_inputs = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in sub_inputs.items()}
        sub_out = torch.empty_like(sub_out)
        poison(sub_out)
        got = result_of(bind(**sub_inputs, out=sub_out), sub_out)
        bits = raw_bits(got.detach().reshape(sub_out.shape))
        n_diff = int((bits != full_bits[:b]).any(dim=-1).sum())
        if n_diff:
            differing.append(f"batch of {b}: {n_diff} of {b} rows differ")
    return not differing, "; ".join(differing)
