"""Launching the CUDA kernels: grids, the tuned 1-D launchers (the shared plumbing is
impls/_frameworks/_launch.py). The kernels are compiled once for every config (they take the
config as launch parameters), so trying a config costs a timing, not a build. CuPy's raw
variants launch the same kernels with these grids."""
from impls._frameworks import _launch
from impls._frameworks._launch import CANDIDATES, sm_count, with_grid  # noqa: F401 - the CUDA impls' names
from impls._frameworks.cuda import build

UNROLL = 4          # packs in flight per thread (elementwise.cuh, reduce_1d.cuh)
NAIVE_THREADS = 256


def blocks_for(n: int, itemsize: int, config: dict, device) -> int:
    """Blocks for ``n`` elements of ``itemsize`` bytes: each thread takes UNROLL 16-byte packs
    a step; capped at ``per_sm`` blocks per SM unless per_sm is 0."""
    return _launch.blocks_for(n, UNROLL * (16 // itemsize), config, sm_count(device))


def fingerprint(space: list[dict]) -> dict:
    return {"kernel": build.build_hash(), "space": space, "arch": build.arch()}


def tuned(key, label: str, make, device, candidates: list[dict] = CANDIDATES):
    """_launch.tuned for the CUDA extension's kernels (``key`` starts with "cuda"), kept per
    build hash and GPU."""
    return _launch.tuned(key, f"CUDA {label}", make, device, fingerprint(candidates), candidates)
