"""The CuPy framework on a machine without a GPU (CI installs no CuPy: its wheel is large and
nothing of it runs on a CPU): every impl module imports and registers every variant without
CuPy, the framework says why it cannot run, and the raw variants, which run the CUDA
extension's kernels, are bound here with stand-ins for CuPy: every kernel they ask NVRTC for
compiles through NVRTC itself (the same source text and name expressions CuPy gets), and every
launch passes the arguments the compiled kernel declares. The kernels' bodies are compiled to
machine code by nvcc in tests/test_cuda_build.py (the extension's build): here NVRTC stops after
its front end, which is where NVRTC and nvcc differ. What only the GPU checks (CuPy's own
compile, the idiomatic kernels' bodies, the results) is in tests/test_gpu.py."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from harness import registry
from impls._frameworks.cupy import kernels
from tests.layouts import misaligned
from tests.test_cuda_build import _nvcc_or_skip

EXPECTED = {("copy", "idiomatic"), ("copy", "tuned"), ("scale", "idiomatic"), ("scale", "tuned"),
            ("sum", "idiomatic"), ("sum", "two_pass"), ("sum", "atomic"),
            ("max", "idiomatic"), ("max", "two_pass"), ("max", "atomic"),
            ("rmsnorm", "idiomatic"), ("rmsnorm", "tuned"),
            ("softmax", "idiomatic"), ("softmax", "three_pass"), ("softmax", "online"), ("softmax", "on_chip"),
            ("layernorm", "idiomatic"), ("layernorm", "unsafe"), ("layernorm", "welford"), ("layernorm", "two_pass"),
            ("rmsnorm_silu_mul_add", "idiomatic"), ("rmsnorm_silu_mul_add", "fused"),
            ("rmsnorm_silu_mul_add", "unfused")}
IDIOMATIC = {"idiomatic", "unsafe"}   # CuPy's own kernels (ElementwiseKernel, ReductionKernel, cupy.sum)


def test_every_op_and_variant_has_its_cupy_impl_registered_without_cupy_installed():
    for op in registry.ops():
        assert "cupy" in registry.impl_modules(op), f"no impls/{op}/cupy.py"
        _, failures = registry.load_impls(op, ["cupy"])
        assert not failures, failures
    found = {(k[0], k[2]) for k in registry.registered() if k[1] == "cupy"}
    assert found == EXPECTED, (found - EXPECTED, EXPECTED - found)
    for op in registry.ops().values():   # the catalogue's names keep their meaning: unsafe is the control
        assert {v for o, v in EXPECTED if o == op.name} >= set(op.variants), op.name
    assert registry.role_of("cupy") == registry.OURS


def test_the_cupy_framework_says_why_it_cannot_run_on_a_cpu():
    reason = registry.frameworks()["cupy"].unusable(torch.device("cpu"))
    assert reason and "NVIDIA GPU" in reason


def test_without_cupy_the_reason_names_the_missing_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)   # import cupy now raises ImportError
    reason = registry.frameworks()["cupy"].unusable(torch.device("cuda"))
    assert reason.startswith("cupy is not importable here") and "cupy-cuda13x" in reason


# --- the source text CuPy compiles ------------------------------------------------------------

def test_a_raw_source_is_the_op_header_with_every_local_include_pasted_once_and_nothing_of_torch():
    assert kernels.ops() == sorted(op for op in registry.ops() if (kernels.IMPLS / op / f"{op}.cuh").exists())
    assert set(kernels.ops()) == set(registry.ops()), "every op's CUDA kernels are in impls/<op>/<op>.cuh"
    for op in kernels.ops():
        text = kernels.source(op)
        assert not re.search(r'#\s*include\s+"', text), f"{op}: a local include was left for NVRTC to find"
        assert not re.search(r"ATen|c10|torch/|TORCH_", text), f"{op}: the raw source names PyTorch"
        assert text.count('#line 1 "impls/_frameworks/cuda/device.cuh"') == 1, f"{op}: device.cuh pasted twice"
        assert f'#line 1 "impls/{op}/{op}.cuh"' in text
    assert kernels.source_hash() == kernels.source_hash()


def test_a_missing_header_is_named_with_where_it_was_looked_for(monkeypatch, tmp_path):
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "broken.cuh").write_text('#pragma once\n#include "nowhere.cuh"\n')
    monkeypatch.setattr(kernels, "IMPLS", tmp_path)
    monkeypatch.setattr(kernels, "ROOT", tmp_path)
    kernels.source.cache_clear()
    try:
        with pytest.raises(FileNotFoundError, match=r'broken/broken.cuh:2: #include "nowhere.cuh" is neither beside'):
            kernels.source("broken")
        with pytest.raises(ValueError, match="no CUDA kernels for 'copy'"):
            kernels.source("copy")
    finally:
        kernels.source.cache_clear()


def test_the_constants_the_cupy_launchers_mirror_are_the_headers():
    from impls._frameworks.cuda.launch import UNROLL
    from impls._frameworks.cupy.launch import FINISH_THREADS
    text = kernels.source("sum")
    assert f"constexpr int FINISH_THREADS = {FINISH_THREADS};" in text
    assert f"constexpr int REDUCE_UNROLL = {UNROLL};" in text
    assert f"constexpr int ELEMENTWISE_UNROLL = {UNROLL};" in kernels.source("copy")


# --- every raw variant, bound with stand-ins for CuPy -------------------------------------------

class _Kernel:
    """Stands in for a compiled kernel: records each launch."""

    def __init__(self, op, expression, launches):
        self.op, self.expression, self.launches = op, expression, launches

    def __call__(self, grid, block, args, stream=None):
        self.launches.append((self.op, self.expression, grid, block, args))


def _bind_every_raw_variant(monkeypatch, pick: int) -> tuple[dict, list, dict]:
    """Bind and launch every raw variant of every op on CPU tensors (every dtype; irregular,
    aligned and misaligned shapes), in config number ``pick`` of each space, with CuPy's
    compile, views and stream stood in for: (the expressions asked of each op, the launches,
    the output tensor and the inputs' addresses of each launch's binding)."""
    from impls._frameworks import _launch
    from impls._frameworks.cuda import launch as cuda_launch
    from impls._frameworks.cuda import rows as cuda_rows
    from impls._frameworks.cupy import interop
    from impls._frameworks.cupy import launch as cupy_launch
    asked: dict[str, set] = {}
    launches: list = []

    def functions(op, expressions):
        asked.setdefault(op, set()).update(expressions)
        return {e: _Kernel(op, e, launches) for e in expressions}

    def one_config(kernel, n, dtype, make, device, rule=None):
        config = _launch.CANDIDATES[pick % len(_launch.CANDIDATES)]
        return _launch.configured(make(config), config)

    def one_row_config(framework, title, unrunnable, key, label, cols, dtype, device, rows, scratch, bind,
                       kept=True, looped=True):
        space = cuda_rows.configs(cols, dtype.itemsize, kept, looped)
        return space[pick % len(space)]

    monkeypatch.setattr(kernels, "functions", functions)
    monkeypatch.setattr(interop, "view", lambda t: t)
    monkeypatch.setattr(interop, "views", lambda *ts: ts)
    monkeypatch.setattr(interop, "stream", lambda: None)
    monkeypatch.setattr(cupy_launch, "chosen", one_config)
    monkeypatch.setattr(cupy_launch, "unrunnable", lambda: ())
    monkeypatch.setattr(cuda_rows, "choose_for", one_row_config)
    monkeypatch.setattr(cuda_launch, "sm_count", lambda device: 132)
    outputs: dict[int, tuple] = {}
    specs = registry.ops()
    for op_name in specs:
        assert not registry.load_impls(op_name, ["cupy"])[1]
    for (op_name, framework, variant), impl in registry.registered().items():
        if framework != "cupy" or variant in IDIOMATIC:
            continue
        spec = specs[op_name]()
        shapes = [(1000,), (7,)] if spec.ndim == 1 else [(3, 781), (2, 16384), (1, 1), (4, 4096)]
        for shape in shapes:
            for dtype in (torch.float32, torch.bfloat16, torch.float16):
                inputs = spec.inputs(shape, dtype, "cpu", seed=1)
                for x_offset, out_offset in ((0, 0), (1, 0), (3, 3)):
                    moved = {k: misaligned(v, x_offset) if isinstance(v, torch.Tensor) else v
                             for k, v in inputs.items()}
                    out = spec.make_output(moved)
                    if out.numel() > 1:
                        out = misaligned(out, out_offset)
                    before = len(launches)
                    impl.bind(**moved, out=out)()
                    assert len(launches) > before, f"{op_name} {variant} launched nothing"
                    read = {v.data_ptr() for v in moved.values() if isinstance(v, torch.Tensor)}
                    for i in range(before, len(launches)):
                        outputs[i] = (out, read)
    return asked, launches, outputs


def _demangled(names: list[str]) -> list[str]:
    proc = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
    return proc.stdout.splitlines()


def _parameters(signature: str) -> list[str]:
    """The parameter types of a demangled ``void f<...>(A, B, ...)``."""
    depth, end = 0, len(signature) - 1
    assert signature.endswith(")"), signature
    for i in range(end, -1, -1):
        depth += {")": 1, "(": -1}.get(signature[i], 0)
        if depth == 0:
            inside = signature[i + 1:end]
            break
    params, depth, start = [], 0, 0
    for i, c in enumerate(inside):
        depth += {"<": 1, ">": -1, "(": 1, ")": -1}.get(c, 0)
        if c == "," and depth == 0:
            params.append(inside[start:i].strip())
            start = i + 1
    return params + [inside[start:].strip()]


# What each scalar C++ type is passed as: numpy's type of the same bytes. A functor is passed by
# value as the bytes of its members: copy's empty Identity is one byte, scale's Times one float.
SCALARS = {"long": np.int64, "long long": np.int64, "int": np.int32, "float": np.float32,
           "hk::Identity": np.int8, "hk::Times": np.float32}
POINTEES = {torch.float32: ("float", "unsigned int"), torch.bfloat16: ("__nv_bfloat16",), torch.float16: ("__half",)}
NVRTC_OPTIONS = ["-arch=compute_90", "-ftz=true"]   # what CuPy adds to kernels.OPTIONS for an H100/H200


def _check_arguments(signature: str, args: tuple, out: torch.Tensor, inputs: set[int]) -> list[str]:
    params = _parameters(signature)
    if len(params) != len(args):
        return [f"{signature}: {len(params)} parameters, {len(args)} arguments"]
    wrong = []
    for i, (param, arg) in enumerate(zip(params, args)):
        if param.endswith("*"):
            pointee = param.removesuffix("*").strip()
            const = pointee.endswith(" const")
            pointee = pointee.removesuffix(" const")
            written = isinstance(arg, torch.Tensor) and arg.data_ptr() == out.data_ptr()
            read = isinstance(arg, torch.Tensor) and arg.data_ptr() in inputs
            # the output is written, the case's inputs only read; the launcher's own scratch either
            ok = isinstance(arg, torch.Tensor) and pointee in POINTEES.get(arg.dtype, ()) \
                and not (written and const) and not (read and not const)
        else:
            ok = type(arg) is SCALARS.get(param)
        if not ok:
            shown = f"a {arg.dtype} tensor" if isinstance(arg, torch.Tensor) else f"{type(arg).__name__}({arg})"
            wrong.append(f"{signature}: parameter {i} ({param}) given {shown}")
    return wrong


def _ptx_parameter_bytes(ptx: str) -> dict[str, list[int]]:
    """Each entry's parameters' sizes in bytes, as the PTX declares them."""
    found = {}
    for name, body in re.findall(r"\.entry\s+(\S+)\(\s*(.*?)\)", ptx, re.S):
        sizes = []
        for param in body.split(","):
            array = re.search(r"\.b8\s+\S+\[(\d+)\]", param)
            width = re.search(r"\.[subf](\d+)\s", param + " ")
            sizes.append(int(array.group(1)) if array else int(width.group(1)) // 8)
        found[name] = sizes
    return found


def _toolkit_include(nvcc: str) -> Path:
    """The CUDA toolkit's include folder (cuda_bf16.h and libcu++ under cccl/), as CuPy finds it:
    CUDA_PATH or CUDA_HOME, else beside the real nvcc, else /usr/local/cuda."""
    import os
    homes = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), Path(nvcc).resolve().parent.parent,
             "/usr/local/cuda"]
    for home in filter(None, homes):
        if (Path(home) / "include" / "cuda_bf16.h").exists():
            return Path(home) / "include"
    pytest.fail(f"no CUDA toolkit include folder (cuda_bf16.h) in {homes}: set CUDA_HOME")


@pytest.mark.slow
def test_every_raw_kernel_compiles_through_nvrtc_and_is_launched_with_the_arguments_it_declares(monkeypatch):
    """Every expression the raw variants ask for (all configs of their spaces, every dtype and
    layout here) compiles through NVRTC from kernels.source with no warning and resolves to a
    kernel; every launch passes, in order, what that kernel declares: pointers to its element
    type (const but for the output), int64_t as numpy.int64, int as numpy.int32, float as
    numpy.float32, a functor as the bytes of its members. The 1-D ops' kernels are compiled to
    PTX too, whose parameter sizes must be the arguments' sizes."""
    from tests import nvrtc
    include = _toolkit_include(_nvcc_or_skip())
    # CuPy's path: its bundled libcu++, then the toolkit's include folder; here the toolkit's own libcu++
    options = [*kernels.OPTIONS, *NVRTC_OPTIONS, f"-I{include / 'cccl'}", f"-I{include}"]
    asked, launches, outputs = {}, [], {}
    for pick in (0, 1, 5):
        more_asked, more_launches, more_outputs = _bind_every_raw_variant(monkeypatch, pick)
        for op, expressions in more_asked.items():
            asked.setdefault(op, set()).update(expressions)
        outputs.update({len(launches) + i: out for i, out in more_outputs.items()})
        launches += more_launches
        monkeypatch.undo()
    assert set(asked) == set(kernels.ops()), set(kernels.ops()) - set(asked)
    for template in ("rmsnorm_rows", "layernorm_rows", "chain_rows", "softmax_rows"):   # every P, trip, W of a space
        seen = {tuple(re.search(r"<\w+, (\d), (\d), .*(true|false)>", e).groups())
                for es in asked.values() for e in es if template in e}
        assert {w for _, _, w in seen} == {"true", "false"}, (template, seen)
        assert {p for p, _, _ in seen} == {"0", "1", "2", "4", "8"}, (template, seen)
        assert {(p == "0", trip) for p, trip, _ in seen} == {(True, "1"), (True, "2"), (True, "4"), (False, "0")}, \
            (template, seen)
    lowered, problems = {}, []
    for op, expressions in sorted(asked.items()):
        full = op in ("copy", "scale", "sum", "max")
        result = nvrtc.compile(kernels.source(op), options + ([] if full else ["-fdevice-syntax-only"]),
                               sorted(expressions), name=f"{op}.cu")
        assert result.ok, f"{op}: NVRTC {nvrtc.version()} fails:\n{result.log[-4000:]}"
        assert "warning" not in result.log.lower(), f"{op}: NVRTC warns:\n{result.log[-4000:]}"
        unresolved = [e for e, name in result.lowered.items() if not name]
        assert not unresolved, f"{op}: name expressions that are no kernel: {unresolved}"
        lowered.update({(op, e): name for e, name in result.lowered.items()})
        if full:
            sizes = _ptx_parameter_bytes(result.ptx)
            for e in expressions:
                for launch in (entry for entry in launches if entry[:2] == (op, e)):
                    given = [8 if isinstance(a, torch.Tensor) else a.itemsize for a in launch[4]]
                    if sizes[result.lowered[e]] != given:
                        problems.append(f"{e}: PTX parameters of {sizes[result.lowered[e]]} bytes, given {given}")
    keys = sorted(lowered)
    signatures = dict(zip(keys, _demangled([lowered[k] for k in keys])))
    for i, (op, expression, grid, block, args) in enumerate(launches):
        problems += _check_arguments(signatures[op, expression], args, *outputs[i])
        if not (1 <= grid[0] < 2 ** 31 and 32 <= block[0] <= 1024 and block[0] % 32 == 0):
            problems.append(f"{expression}: grid {grid}, block {block}")
    assert not problems, "\n".join(sorted(set(problems))[:20])


@pytest.mark.slow
def test_the_fp32_softmax_keeps_subnormal_results_in_cupy_s_flushing_build():
    """CuPy compiles with -ftz=true, which flushes subnormal results to 0 (the large_magnitude
    set's smallest probabilities): the fp32 softmax kernels use the PTX instructions that keep
    them (ex2.approx.f32, mul.rn.f32) there, and only the 16-bit kernels' shifted exp may flush."""
    from tests import nvrtc
    include = _toolkit_include(_nvcc_or_skip())
    options = [*kernels.OPTIONS, *NVRTC_OPTIONS, f"-I{include / 'cccl'}", f"-I{include}"]
    expressions = {variant: f"hk::softmax_rows<float, {p}, {trip}, {v}, {w}>"
                   for variant, p, trip, v, w in (("three_pass", 0, 1, 0, "false"), ("online", 0, 2, 1, "false"),
                                                  ("on_chip", 8, 0, 2, "true"))}
    result = nvrtc.compile(kernels.source("softmax"), options, sorted(expressions.values()), name="softmax.cu")
    assert result.ok, result.log[-4000:]
    bodies = dict(re.findall(r"\.entry\s+(\S+)\((.*?)(?=\.entry|\Z)", result.ptx, re.S))
    for variant, expression in expressions.items():
        body = bodies[result.lowered[expression]]
        assert "ex2.approx.f32" in body and "ex2.approx.ftz" not in body, (variant, "exp flushes")
        assert "mul.rn.f32" in body, (variant, "no subnormal-keeping multiply for the output")
