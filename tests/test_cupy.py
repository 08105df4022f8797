"""The CuPy framework on a machine without a GPU (CI installs no CuPy: its wheel is large and
nothing of it runs on a CPU): every impl module imports and registers every variant without
CuPy, the framework says why it cannot run, and every raw kernel instantiation a launcher may
ask for compiles for sm_90 with this machine's nvcc and no warning. What only the GPU checks
(NVRTC's compile of the same sources, the idiomatic kernels' bodies, the results) is in
tests/test_gpu.py and devtools/gpu/cupy.sh."""
from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from harness import registry
from impls._frameworks.cupy import kernels
from tests.test_cuda_build import _nvcc_or_skip

EXPECTED = {("copy", "idiomatic"), ("copy", "raw"), ("scale", "idiomatic"), ("scale", "raw"),
            ("sum", "idiomatic"), ("sum", "two_pass"), ("sum", "atomic"),
            ("max", "idiomatic"), ("max", "two_pass"), ("max", "atomic"),
            ("rmsnorm", "idiomatic"), ("rmsnorm", "raw"),
            ("softmax", "idiomatic"), ("softmax", "three_pass"), ("softmax", "online"), ("softmax", "on_chip"),
            ("layernorm", "idiomatic"), ("layernorm", "naive"), ("layernorm", "welford"), ("layernorm", "two_pass"),
            ("rmsnorm_silu_mul_add", "idiomatic"), ("rmsnorm_silu_mul_add", "fused"),
            ("rmsnorm_silu_mul_add", "unfused")}


def test_every_op_and_variant_has_its_cupy_impl_registered_without_cupy_installed():
    for op in registry.ops():
        assert "cupy" in registry.impl_modules(op), f"no impls/{op}/cupy.py"
        _, failures = registry.load_impls(op, ["cupy"])
        assert not failures, failures
    found = {(k[0], k[2]) for k in registry.registered() if k[1] == "cupy"}
    assert found == EXPECTED, (found - EXPECTED, EXPECTED - found)
    for op in registry.ops().values():   # the catalogue's names keep their meaning: naive is the control
        assert {v for o, v in EXPECTED if o == op.name} >= set(op.variants), op.name
    assert registry.role_of("cupy") == registry.OURS


def test_the_cupy_framework_says_why_it_cannot_run_on_a_cpu():
    reason = registry.frameworks()["cupy"].unusable(torch.device("cpu"))
    assert reason and "NVIDIA GPU" in reason


def test_without_cupy_the_reason_names_the_missing_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)   # import cupy now raises ImportError
    reason = registry.frameworks()["cupy"].unusable(torch.device("cuda"))
    assert reason.startswith("cupy is not importable here") and "cupy-cuda13x" in reason


@pytest.mark.slow
def test_every_raw_kernel_instantiation_compiles_for_sm90_without_warnings(tmp_path):
    """One nvcc per source (in parallel), each taking the address of every instantiation a
    launcher may ask for (kernels.instantiations), as NVRTC's name expressions instantiate them."""
    compiler = _nvcc_or_skip()
    wanted = kernels.instantiations()
    assert set(wanted) == set(kernels.SOURCES)

    def compile_one(name):
        lines = [f'#include "{kernels.COMMON}"', f'#include "{name}"', "void* const instances[] = {",
                 *(f"    reinterpret_cast<void*>(&{e})," for e in wanted[name]), "};",
                 "void* instance(int i) { return instances[i]; }"]
        wrapper = tmp_path / f"{name}.cu"
        wrapper.write_text("\n".join(lines) + "\n")
        cmd = [compiler, "-c", str(wrapper), "-o", str(tmp_path / f"{name}.o"), *kernels.OPTIONS, "-O3",
               "-gencode", "arch=compute_90,code=sm_90", "-Xcompiler", "-fPIC", "-Xptxas", "-warn-spills",
               "-I", str(kernels.HERE)]
        return name, subprocess.run(cmd, capture_output=True, text=True)

    with ThreadPoolExecutor(len(wanted)) as pool:
        results = list(pool.map(compile_one, wanted))
    for name, proc in results:
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"{name} does not compile:\n{output[-3000:]}"
        assert "warning" not in output.lower(), f"{name} compiles with warnings (a spill is one):\n{output[-3000:]}"


def test_the_row_configs_cover_every_row_and_fit_the_kernels_bounds():
    from impls._frameworks.cupy.rows import MAX_THREADS, configs
    source = (kernels.HERE / "rows.cuh").read_text()
    assert "__launch_bounds__(MAX_THREADS, 1)" in source and "constexpr int MAX_THREADS = 512;" in source
    assert MAX_THREADS == 512
    for cols in (1, 7, 127, 781, 1000, 4096, 8192, 16384, 65536, 262144):
        for itemsize in (2, 4):
            packs = -(-cols // (16 // itemsize))
            kept, looped = configs(cols, itemsize, looped=False), configs(cols, itemsize, kept=False)
            assert looped, (cols, itemsize)
            assert all(c["packs"] == 0 for c in looped)
            for c in kept:   # the registers hold the whole row
                assert c["packs"] * c["group"] >= packs, c
            for c in kept + looped:
                assert c["threads"] % c["group"] == 0 and c["threads"] % 32 == 0 and c["threads"] <= MAX_THREADS
            if cols <= 16384:
                assert kept, (cols, itemsize)
