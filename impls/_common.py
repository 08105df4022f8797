"""Helpers shared by the op specs: random inputs and rounding-based tolerances."""
from __future__ import annotations

import math

import torch

from harness.registry import Tol

DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def unit_roundoff(dtype: torch.dtype) -> float:
    """Largest relative error of one round-to-nearest into ``dtype`` (2^-24, 2^-8, 2^-11)."""
    return torch.finfo(dtype).eps / 2


U32 = unit_roundoff(torch.float32)


def rounding_tolerances(roundings: int, fp32_ulps: int, why: str,
                        scaled_roundings: int = 0, scaled_ulps: int = 0) -> dict[torch.dtype, Tol]:
    """Tolerances from an error budget instead of a guess.

    ``roundings``: how many times a correct implementation may round a value into the
    low-precision dtype (the output, plus intermediates a PyTorch user's code rounds).
    ``fp32_ulps``: the fp32 arithmetic error (accumulation, rsqrt/exp approximations).
    Both are relative to |ref|. The ``scaled_`` pair is the same budget relative to the
    op's ``error_scale`` (for ops whose terms can cancel: the error follows the terms).
    fp32 inputs round nothing into a low-precision dtype: only the ulps count there.
    """
    tols = {}
    for dtype in DTYPES:
        u = 0.0 if dtype == torch.float32 else unit_roundoff(dtype)
        tols[dtype] = Tol(rtol=roundings * u + fp32_ulps * U32,
                          atol=scaled_roundings * u + scaled_ulps * U32, why=why)
    return tols


EXACT = {d: Tol(0.0, 0.0, "the result is exact: any difference is a bug") for d in DTYPES}


def randn(shape, dtype, gen, device, mean=0.0, std=1.0) -> torch.Tensor:
    """Normal samples drawn in fp32 on the device, then rounded to ``dtype``."""
    x = torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
    return (x * std + mean).to(dtype)


def uniform(shape, dtype, gen, device, lo=0.0, hi=1.0) -> torch.Tensor:
    x = torch.rand(shape, generator=gen, device=device, dtype=torch.float32)
    return (x * (hi - lo) + lo).to(dtype)


def pick(n: int, k: int, gen, device) -> torch.Tensor:
    """``k`` random positions in ``range(n)`` (with repeats)."""
    return torch.randint(0, n, (k,), generator=gen, device=device)


def eps_param(eps) -> float:
    """A norm's eps (ops.<op>.params.eps): a finite number >= 0, or a ValueError saying so
    (the harness names the key): a negative one makes rsqrt(mean + eps) NaN on rows whose
    mean square is below -eps, and every impl and the reference with it."""
    value = float(eps)
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"eps must be a finite number >= 0, not {eps!r}")
    return value
