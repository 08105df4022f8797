"""Eager RMSNorm: ``F.rms_norm`` (a fused kernel on CUDA in recent PyTorch)."""
import torch.nn.functional as F

from harness.registry import impl


def rmsnorm(x, weight, eps):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


@impl("rmsnorm", "eager")
def bind(x, weight, eps, out):
    return lambda: rmsnorm(x, weight, eps)
