"""Tensors laid out to test kernels' address handling."""
import torch


def misaligned(t: torch.Tensor, offset: int) -> torch.Tensor:
    """``t``'s values in a view of ``t``'s shape that starts ``offset`` elements into a fresh
    allocation on ``t``'s device (no 16-byte alignment for an odd offset)."""
    view = torch.empty(t.numel() + offset, dtype=t.dtype, device=t.device)[offset:].view(t.shape)
    view.copy_(t)
    return view
