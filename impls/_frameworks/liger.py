"""Liger-Kernel (linkedin/Liger-Kernel) as a peer: its Triton forward kernels, called
without autograd. An optional extra: ``pip install liger-kernel``."""
from harness.registry import Framework


class Liger(Framework):
    name = "liger"

    def unusable(self, device):
        try:
            import liger_kernel  # noqa: F401
        except ImportError:
            return "liger-kernel is not installed (optional: pip install liger-kernel)"
        if device.type != "cuda":
            return "Liger's host code launches on CUDA devices only"
        return None
