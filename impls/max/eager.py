"""Eager max: ``torch.amax(x)`` (propagates NaN), returned in x's dtype, which holds
the maximum exactly."""
import torch

from harness.registry import impl


def amax(x):
    return torch.amax(x)


@impl("max", "eager")
def bind(x, out):
    return lambda: amax(x)
