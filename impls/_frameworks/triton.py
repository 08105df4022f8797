"""Triton. On a CUDA GPU for real; on a CPU under Triton's interpreter (TRITON_INTERPRET=1),
which the harness switches on itself: correct results, no timing claims."""
import os

from harness.registry import Framework


class Triton(Framework):
    name = "triton"

    def prepare(self, device):
        # Read by @triton.jit when the impl modules are imported: set it before that.
        if device.type == "cpu":
            os.environ.setdefault("TRITON_INTERPRET", "1")

    def unusable(self, device):
        try:
            import triton  # noqa: F401
        except ImportError as e:
            return f"triton is not installed ({e}); pip install triton"
        if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
            return "Triton runs on a CPU only under its interpreter: set TRITON_INTERPRET=1"
        if device.type not in ("cpu", "cuda"):
            return f"Triton does not run on {device.type}"
        return None

    def interpreted(self, device):
        return device.type == "cpu"
