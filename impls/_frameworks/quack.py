"""QuACK (Dao-AILab/quack, ``quack-kernels``) as a peer: CuTe-DSL kernels for RMSNorm and
softmax, called through their out-writing forward functions without autograd. An optional
extra: ``pip install quack-kernels nvidia-cutlass-dsl[cu13]``; it runs on sm_90 and newer.
Installed with ``pip --target``, the DSL's ``.pth`` is not processed: put
``nvidia_cutlass_dsl/dsl_packages`` of the target on PYTHONPATH."""
from harness.registry import Framework


class Quack(Framework):
    name = "quack"
    packages = ("quack-kernels",)

    def unusable(self, device):
        if device.type != "cuda":
            return "QuACK's kernels run on NVIDIA GPUs only"
        import torch
        major, minor = torch.cuda.get_device_capability(device)
        if major < 9:
            return f"QuACK's kernels need compute capability 9.0 or newer; this GPU is {major}.{minor}"
        try:
            import quack  # noqa: F401
        except ImportError as e:
            return (f"quack-kernels is not installed or cannot load ({e}); optional: "
                    "pip install quack-kernels 'nvidia-cutlass-dsl[cu13]'")
        return None
