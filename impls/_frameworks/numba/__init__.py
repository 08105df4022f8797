"""Numba (NVIDIA's numba-cuda): ``@cuda.jit`` kernels. On a CUDA GPU for real; on a CPU under
Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1), which the harness switches on itself: each
CUDA thread a Python thread, correct results, no timing claims (timed as an interpreter).

The package imports without Numba (the registry asks it whether it is usable); its modules,
one job each, are imported by the impls:
- runtime: the simulator switch, the disk cache, zero-copy views of torch tensors, launches
  on the current PyTorch stream (compiled at bind, never in the launcher)
- simwarp: the warp shuffles the simulator lacks, installed only under the simulator
- primitives: the device code that differs between the GPU (primitives_gpu, with ptx: inline
  PTX, a line an instruction) and the simulator (primitives_sim), the same names from either
- device: device functions every kernel shares (fp32 loads and stores of fp32, fp16 and bf16,
  as elements, words and chunks)
- functions: the softmax's exp and the chain's silu, in the form each output type needs
- groups: reductions over a group of threads (sum, max, Welford, online softmax), one factory
- rowchunks: a row's chunks, steps and shared-memory cache (the row kernels' device code)
- naive: the first row kernels' launch, one block of 256 threads a row, no table
- launch: the 1-D kernels' grids (table or rule: harness.launch.configs)
- rows: the row kernels' configs (threads per row; table or rule)
"""
import os

from harness.registry import OURS, Framework

SIM_ENV = "NUMBA_ENABLE_CUDASIM"


class Numba(Framework):
    name = "numba"
    role = OURS
    packages = ("numba", "numba-cuda")

    def prepare(self, device):
        # Read when numba.cuda is first imported: set before the impl modules are imported.
        if device.type == "cpu":
            os.environ.setdefault(SIM_ENV, "1")
            _reload_config_if_imported()
        # One launch per small grid is what a row kernel on a few rows is: not worth a warning.
        os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
        from impls._frameworks.numba import cachedir
        cachedir.configure()

    def unusable(self, device):
        try:
            import numba  # noqa: F401
        except ImportError as e:
            return f"numba is not installed ({e}); pip install numba==0.68.0 numba-cuda==0.30.4"
        try:
            from numba import cuda
        except ImportError as e:
            return f"numba.cuda is not usable ({e}); pip install numba-cuda==0.30.4"
        if getattr(cuda, "implementation", None) != "NVIDIA":
            return "numba.cuda is numba's own deprecated CUDA target: pip install numba-cuda==0.30.4"
        from numba.cuda.core import config
        simulated = bool(config.ENABLE_CUDASIM)
        if device.type == "cpu":
            if not simulated:
                return (f"Numba's kernels run on a CPU only under its CUDA simulator: set {SIM_ENV}=1 "
                        "before numba is imported")
            return None
        if device.type != "cuda":
            return f"Numba's CUDA kernels do not run on {device.type}"
        if simulated:
            return f"{SIM_ENV}=1 is set: Numba simulates the GPU on the CPU; unset it to run on {device}"
        if not cuda.is_available():
            return "numba.cuda finds no usable GPU or driver (numba.cuda.detect() says why)"
        return None

    def interpreted(self, device):
        return device.type == "cpu"

    def settings(self):
        import numba
        from impls._frameworks.numba import cachedir
        try:
            import numba_cuda
            version = numba_cuda.__version__
        except ImportError:
            version = "?"
        return {"numba": numba.__version__, "numba_cuda": version, "cache": cachedir.path().name}


def _reload_config_if_imported():
    """numba reads its environment when first imported: a ``numba`` imported before this
    (numba.cuda not yet) must read it again to see the simulator switch."""
    import sys
    config = sys.modules.get("numba.core.config")
    if config is not None and "numba.cuda" not in sys.modules:
        config.reload_config()
