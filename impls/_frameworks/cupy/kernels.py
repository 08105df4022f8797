"""The raw variants' kernels: the CUDA extension's own, compiled by NVRTC through cupy.RawModule.

An op's kernels are its ``impls/<op>/<op>.cuh`` and the device headers of
impls/_frameworks/cuda/ it includes (device code only: device.cuh says why). ``source(op)`` is
that header with every local ``#include "..."`` pasted in, once each, in the order nvcc would
read them, with ``#line`` marks so that NVRTC's messages name the real file and line: CuPy's
compile cache is keyed by the source text and the options, so it must see every line that
decides the binary. The toolkit's headers (cuda_bf16.h, cuda_fp16.h) and libcu++'s
(cuda/std/...) stay #includes: CuPy puts its bundled libcu++ and the CUDA toolkit's include
folder on NVRTC's path.

What differs from the extension's build of the same text: NVRTC instead of nvcc (the same
front end and optimiser of one CUDA version, not necessarily the extension's nvcc), CuPy's
options (it appends ``-ftz=true`` after the caller's, so -ftz=false cannot be asked for,
cupy/cupy#9576: fp32 results that should be subnormal come out 0, softmax's large_magnitude
set shows it), and CuPy's launch (cuLaunchKernel from Python, no TORCH_CHECK in front).

``functions(op, expressions)`` compiles the template instantiations (NVRTC name expressions,
e.g. ``hk::rmsnorm_rows<__nv_bfloat16, 4, 0, true>``) a launcher may use, in one NVRTC call, in
bind: never inside a timed launch. tests/test_cupy.py compiles the same text with the same name
expressions through NVRTC on a CPU.
"""
from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

import torch

IMPLS = Path(__file__).resolve().parent.parent.parent
HEADERS = IMPLS / "_frameworks" / "cuda"     # the shared device headers, nvcc's -I for the extension
ROOT = IMPLS.parent
# No fast math (it approximates exp and division); CuPy adds -ftz=true itself (above).
OPTIONS = ("-std=c++17",)

# The kernels' template argument for a dtype: the extension's types (HK_DISPATCH in host.cuh).
TYPES = {torch.float32: "float", torch.float16: "__half", torch.bfloat16: "__nv_bfloat16"}

TOOLKIT_HEADERS = ("cuda_bf16.h", "cuda_fp16.h", "vector_types.h", "cuda/std/")
_INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def ops() -> list[str]:
    """The ops whose kernels CuPy can compile: every impls/<op>/<op>.cuh."""
    return sorted(p.parent.name for p in IMPLS.glob("*/*.cuh") if p.stem == p.parent.name)


def _shown(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def _paste(path: Path, seen: set[Path]) -> list[str]:
    where = _shown(path)
    out = [f'#line 1 "{where}"']
    for number, line in enumerate(path.read_text().splitlines(), 1):
        found = _INCLUDE.match(line)
        if found:
            name = found.group(1)
            target = next((p for p in (path.parent / name, HEADERS / name) if p.exists()), None)
            if target is None:
                raise FileNotFoundError(f'{where}:{number}: #include "{name}" is neither beside it nor in '
                                        f'{_shown(HEADERS)}: the extension and CuPy include from there only')
            if target.resolve() not in seen:
                seen.add(target.resolve())
                out += _paste(target, seen)
            out.append(f'#line {number + 1} "{where}"')
        elif line.strip() == "#pragma once":   # the paste keeps each header once already
            out.append("")
        else:
            out.append(line)
    return out


@functools.cache
def source(op: str) -> str:
    """impls/<op>/<op>.cuh with its local headers pasted in: the text NVRTC compiles."""
    header = IMPLS / op / f"{op}.cuh"
    if not header.exists():
        raise ValueError(f"no CUDA kernels for {op!r} (impls/{op}/{op}.cuh); there are: {', '.join(ops())}")
    return "\n".join(_paste(header, {header.resolve()})) + "\n"


def source_hash() -> str:
    """What decides every raw kernel's binary on our side: each op's pasted source and the options."""
    h = hashlib.sha256()
    for op in ops():
        h.update(source(op).encode())
    h.update(repr(OPTIONS).encode())
    return h.hexdigest()[:16]


_modules: dict = {}


def functions(op: str, expressions: list[str]) -> dict:
    """The kernels ``expressions`` of ``op``'s source, compiled now (once per process and set;
    CuPy keeps the binary on disk), by expression."""
    import cupy
    key = (op, tuple(expressions))
    if key not in _modules:
        module = cupy.RawModule(code=source(op), options=OPTIONS, name_expressions=list(expressions))
        try:
            _modules[key] = {e: module.get_function(e) for e in expressions}   # get_function compiles
        except Exception as e:  # noqa: BLE001 - CuPy's CompileException; NVRTC's log is the useful part
            missing = next((h for h in TOOLKIT_HEADERS if h in str(e) and "cannot open" in str(e)), None)
            if missing:
                raise RuntimeError(f"NVRTC could not open {missing} for {op}'s raw kernels: CuPy puts the CUDA "
                                   f"toolkit's include folder on its path only where it finds a toolkit; set "
                                   f"CUDA_PATH to one (CUDA 13)") from e
            raise
    return _modules[key]


def settings() -> dict:
    """What every CuPy launch shares: CuPy's version, its routines' accelerators (whether
    cupy.sum takes CUB's path), NVRTC's version, the raw kernels' source hash and options."""
    import cupy
    found = {"cupy": cupy.__version__, "sources": source_hash(), "options": " ".join(OPTIONS),
             "raw_kernels": "the CUDA extension's (impls/<op>/<op>.cuh), compiled by NVRTC"}
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
