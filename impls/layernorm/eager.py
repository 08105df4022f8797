"""Eager LayerNorm: ``F.layer_norm`` (PyTorch's own kernel, Welford on CUDA), and the
negative control ``unsafe`` written the way it goes wrong: var = E[x²] - E[x]² in fp32."""
import torch
import torch.nn.functional as F

from harness.registry import impl


def layernorm(x, weight, bias, eps):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def layernorm_unsafe(x, weight, bias, eps):
    xf = x.float()
    mean = xf.mean(dim=-1, keepdim=True)
    var = xf.square().mean(dim=-1, keepdim=True) - mean.square()   # cancels when |mean| >> std
    return ((xf - mean) * torch.rsqrt(var + eps) * weight.float() + bias.float()).to(x.dtype)


@impl("layernorm", "eager")
def bind(x, weight, bias, eps, out):
    return lambda: layernorm(x, weight, bias, eps)


@impl("layernorm", "eager", variant="unsafe")
def bind_unsafe(x, weight, bias, eps, out):
    return lambda: layernorm_unsafe(x, weight, bias, eps)
