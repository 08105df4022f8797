"""NVRTC on a CPU, through ctypes: compile a source with name expressions to PTX, as
cupy.RawModule does on the GPU, and say what came out (the log, each expression's lowered
name, the PTX). The library is pip's nvidia-cuda-nvrtc (Numba needs it too), found by
cuda-pathfinder; it opens libnvrtc-builtins by name at its first compile, so that one is
loaded first, from beside it."""
from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Compiled:
    ok: bool
    log: str
    ptx: str = ""
    lowered: dict[str, str | None] = field(default_factory=dict)


@functools.cache
def library() -> ctypes.CDLL:
    from cuda import pathfinder
    path = Path(pathfinder.load_nvidia_dynamic_lib("nvrtc").abs_path)
    builtins = sorted(path.parent.glob("libnvrtc-builtins.so.*"))
    if not builtins:
        raise FileNotFoundError(f"no libnvrtc-builtins beside {path}: NVRTC cannot compile without it")
    ctypes.CDLL(str(builtins[0]), mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(str(path))
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    return lib


def version() -> str:
    major, minor = ctypes.c_int(), ctypes.c_int()
    library().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"{major.value}.{minor.value}"


def _text(getter_size, getter, program) -> str:
    size = ctypes.c_size_t()
    getter_size(program, ctypes.byref(size))
    buffer = ctypes.create_string_buffer(size.value)
    getter(program, buffer)
    return buffer.value.decode(errors="replace")


def compile(source: str, options: list[str], expressions: list[str], name: str = "kernels.cu") -> Compiled:
    """``source`` compiled with ``options`` and ``expressions`` added as name expressions."""
    lib = library()
    program = ctypes.c_void_p()
    status = lib.nvrtcCreateProgram(ctypes.byref(program), source.encode(), name.encode(), 0, None, None)
    if status:
        raise RuntimeError(f"nvrtcCreateProgram: {lib.nvrtcGetErrorString(status).decode()}")
    try:
        for e in expressions:
            lib.nvrtcAddNameExpression(program, e.encode())
        argv = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
        status = lib.nvrtcCompileProgram(program, len(options), argv)
        log = _text(lib.nvrtcGetProgramLogSize, lib.nvrtcGetProgramLog, program)
        if status:
            return Compiled(False, log)
        lowered = {}
        for e in expressions:
            out = ctypes.c_char_p()
            found = lib.nvrtcGetLoweredName(program, e.encode(), ctypes.byref(out)) == 0 and out.value
            lowered[e] = out.value.decode() if found else None
        return Compiled(True, log, _text(lib.nvrtcGetPTXSize, lib.nvrtcGetPTX, program), lowered)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))
