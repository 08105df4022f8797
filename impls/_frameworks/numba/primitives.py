"""The primitives, the only device code that differs between the GPU and Numba's CUDA
simulator: primitives_gpu.py (libdevice, LLVM, inline PTX) on a GPU, primitives_sim.py (numpy)
under the simulator, the same names from either. Everything else (device.py, groups.py,
rowchunks.py, the kernels) is one code for both, built on these."""
from impls._frameworks.numba.runtime import SIMULATED

if SIMULATED:
    from impls._frameworks.numba.primitives_sim import *  # noqa: F401,F403 - its __all__, primitives_gpu's names
else:
    from impls._frameworks.numba.primitives_gpu import *  # noqa: F401,F403
