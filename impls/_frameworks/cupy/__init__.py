"""CuPy: each op written twice, so that the harness shows what each way gets.

- ``idiomatic``: the op as a CuPy user writes it: ``cupy.copyto``, ``cupy.sum``/``cupy.max``
  (CuPy's CUB-backed device reductions where CuPy can read the dtype), and ElementwiseKernel
  and ReductionKernel (idiomatic.py) for the rest: a row op's statistics as a ReductionKernel
  over the rows, then an ElementwiseKernel that broadcasts them. LayerNorm's ``unsafe``
  negative control is written this way too.
- the catalogue's variant names (``two_pass``, ``atomic``, ``three_pass``, ``online``,
  ``on_chip``, ``welford``, ``fused``, ``unfused``) and ``tuned`` (ops with no variants): the CUDA
  extension's own kernels (impls/<op>/<op>.cuh and the device headers of ../cuda/), compiled by
  NVRTC through cupy.RawModule and launched by CuPy with the CUDA framework's configs, tuned for
  this build: how fast CuPy can be made, beside how fast its idiomatic way is.

Every launch runs on the current PyTorch stream, on zero-copy DLPack views of the harness's
tensors (interop); bf16 travels as an int16 view, whose bits the raw kernels read as
__nv_bfloat16 and the idiomatic ones convert by hand. Kernels are compiled in ``bind``
(kernels.py; NVRTC, kept on disk by CuPy), never in a launch.

Modules: interop (views, stream, CuPy's allocations through PyTorch's allocator), kernels (the
raw variants' sources and their compile), launch (the 1-D kernels' launchers), rows (the row
kernels' launchers), idiomatic (the ElementwiseKernel/ReductionKernel helpers)."""
from harness.registry import OURS, Framework


class CuPy(Framework):
    name = "cupy"
    role = OURS
    packages = ("cupy-cuda13x", "cupy-cuda12x", "cupy")

    def unusable(self, device):
        if device.type != "cuda":
            return ("CuPy runs on an NVIDIA GPU only (on a CPU the tests import these modules and compile the "
                    "raw kernels' sources with NVRTC, without running them)")
        try:
            import cupy
        except Exception as e:  # noqa: BLE001 - a missing or broken install is the same answer
            return (f"cupy is not importable here ({type(e).__name__}: {e}); install the wheel for this CUDA, "
                    f"e.g. pip install cupy-cuda13x")
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as e:  # noqa: BLE001 - CuPy's own words say what is wrong
            return f"CuPy sees no GPU: {type(e).__name__}: {e}"
        index = device.index if device.index is not None else 0
        if index >= count:
            return f"CuPy sees {count} GPU(s); {device} is not one of them"
        return None

    def settings(self):
        from impls._frameworks.cupy import kernels
        return kernels.settings()
