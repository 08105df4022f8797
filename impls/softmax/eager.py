"""Eager softmax: ``torch.softmax(x, dim=-1)``, a new output each call, as users write it."""
import torch

from harness.registry import impl


def softmax(x):
    return torch.softmax(x, dim=-1)


@impl("softmax", "eager")
def bind(x, out):
    return lambda: softmax(x)
