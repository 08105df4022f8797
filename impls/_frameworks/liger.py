"""Liger-Kernel (linkedin/Liger-Kernel) as a peer: its Triton forward kernels, called
without autograd. An optional extra: ``pip install liger-kernel``."""
import importlib.util

from harness.registry import Framework

INSTALL = "optional: pip install liger-kernel"


class Liger(Framework):
    name = "liger"
    packages = ("liger-kernel",)

    def unusable(self, device):
        # Found, not imported: its import takes seconds and only the case process needs it
        # (impls/_frameworks/_peer.py); an install that does not import skips its cases at bind.
        if importlib.util.find_spec("liger_kernel") is None:
            return f"liger-kernel is not installed ({INSTALL})"
        if device.type != "cuda":
            return "Liger's host code launches on CUDA devices only"
        return None
