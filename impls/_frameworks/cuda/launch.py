"""Launching the CUDA kernels: grids, the 1-D launchers' configs (the shared plumbing is
impls/_frameworks/_launch.py). The kernels are compiled once for every config (they take the
config as launch parameters), so trying a config costs a timing, not a build. CuPy's raw
variants launch the same kernels with these grids."""
from impls._frameworks import _launch
from impls._frameworks._launch import CANDIDATES, sm_count, with_grid  # noqa: F401 - the CUDA impls' names

UNROLL = 4          # packs in flight per thread (elementwise.cuh, reduce_1d.cuh)
NAIVE_THREADS = 256


def blocks_for(n: int, itemsize: int, config: dict, device) -> int:
    """Blocks for ``n`` elements of ``itemsize`` bytes: each thread takes UNROLL 16-byte packs
    a step; capped at ``per_sm`` blocks per SM unless per_sm is 0."""
    return _launch.blocks_for(n, UNROLL * (16 // itemsize), config, sm_count(device))


def chosen(kernel: str, n: int, dtype, make, device, rule: dict = _launch.RULE):
    """_launch.chosen for the CUDA extension's 1-D kernels (``kernel`` without "cuda")."""
    return _launch.chosen(f"cuda {kernel}", n, dtype, make, device, CANDIDATES, rule)
