"""The raw kernels: the .cuh sources here, compiled by CuPy (NVRTC) in ``bind``.

A source is common.cuh followed by one kernel file, pasted together in Python rather than
#included, so that CuPy's compile cache (keyed by the source text and the options) sees every
line that decides the binary. The kernels are C++ templates (storage type, packs kept, the
variant's switches); ``functions`` compiles the instantiations a launcher may use in one NVRTC
call and returns them, so a kernel is never compiled inside a timed launch. nvcc compiles the
same files on a CPU in CI (tests/test_cupy.py).
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
COMMON = "common.cuh"
SOURCES = ("elementwise.cuh", "reduce_1d.cuh", "rows.cuh")
# No fast math (it approximates exp and division). CuPy itself appends -ftz=true to every
# compile, after the caller's options, so -ftz=false cannot be asked for (cupy/cupy#9576):
# fp32 results that should be subnormal come out 0 (softmax's large_magnitude set), and the
# checks report them.
OPTIONS = ("-std=c++17",)

# The kernels' names for the storage type of a dtype (common.cuh).
TYPES = {torch.float32: "float", torch.float16: "f16_t", torch.bfloat16: "bf16_t"}


@functools.cache
def source(name: str) -> str:
    if name not in SOURCES:
        raise ValueError(f"no CuPy kernel source {name!r}; there are {', '.join(SOURCES)}")
    return (HERE / COMMON).read_text() + "\n" + (HERE / name).read_text()


def source_hash() -> str:
    h = hashlib.sha256()
    for name in (COMMON, *SOURCES):
        h.update((HERE / name).read_bytes())
    h.update(repr(OPTIONS).encode())
    return h.hexdigest()[:16]


_modules: dict = {}


def functions(name: str, expressions: list[str]) -> dict:
    """The kernels ``expressions`` (C++ template names, e.g. ``rmsnorm_rows<bf16_t, 4>``) of
    source ``name``, compiled now (once per process and set; CuPy keeps the binary on disk)."""
    import cupy
    key = (name, tuple(expressions))
    if key not in _modules:
        module = cupy.RawModule(code=source(name), options=OPTIONS, name_expressions=list(expressions))
        _modules[key] = {e: module.get_function(e) for e in expressions}   # get_function compiles
    return _modules[key]


def function(name: str, expression: str):
    return functions(name, [expression])[expression]


def settings() -> dict:
    """What every CuPy launch shares: CuPy's version, its routines' accelerators (whether
    cupy.sum takes CUB's path), NVRTC's version and the raw sources' hash."""
    import cupy
    found = {"cupy": cupy.__version__, "sources": source_hash(), "options": " ".join(OPTIONS)}
    try:
        from cupy._core import _accelerator
        found["routine_accelerator_ids"] = list(_accelerator.get_routine_accelerators())
    except Exception:  # noqa: BLE001 - a private module of CuPy's: informative, not needed
        pass
    try:
        found["nvrtc"] = ".".join(map(str, cupy.cuda.nvrtc.getVersion()))
    except Exception:  # noqa: BLE001
        pass
    return found


def instantiations() -> dict[str, list[str]]:
    """Every template instantiation a launcher may ask for, by source: what CI compiles."""
    from impls._frameworks.cupy.launch import ELEMENTWISE
    from impls._frameworks.cupy.rows import KEPT
    types = list(TYPES.values())
    packs = (0, *KEPT)
    flags = ("true", "false")
    rows = [f"{k}<{t}, {p}>" for k in ("rmsnorm_rows", "rmsnorm_silu_mul_add_rows") for t in types for p in packs]
    rows += [f"{k}<{t}, {p}, {f}>" for k in ("softmax_rows", "layernorm_rows") for t in types for p in packs
             for f in flags]
    return {
        "elementwise.cuh": [f"elementwise<{t}, {op}>" for t in types for op in ELEMENTWISE.values()],
        "reduce_1d.cuh": [f"reduce_1d<{t}, {m}, {a}>" for t in types for m in flags for a in flags]
                         + [f"reduce_partials<{m}>" for m in flags],
        "rows.cuh": rows,
    }
