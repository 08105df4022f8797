"""The CUDA C++ kernels on a machine without a GPU: every .cu compiles for sm_90 with this
machine's nvcc and no warning; the binding modules register every op and variant; the
framework says why it cannot run, and a build failure reaches the plan as a reason."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness import registry
from impls._frameworks.cuda import build

IN_CI = os.environ.get("CI") == "true"


def _nvcc_or_skip() -> str:
    compiler = build.nvcc()
    if compiler is None:
        if IN_CI:
            pytest.fail("nvcc is not on this CI machine: the CUDA sources cannot be compile-checked")
        pytest.skip("no nvcc here")
    return compiler


def _compile_command(compiler: str, source: Path, out: Path, stub: Path) -> list[str]:
    """nvcc -c for sm_90 with the flags the build gives (FLAGS, torch's own nvcc flags) and
    torch's headers. The CPU wheel of torch lacks one header its CUDA build generates
    (c10/cuda/impl/cuda_cmake_macros.h, a single define): ``stub`` holds it."""
    from torch.utils import cpp_extension
    root = Path(torch.__file__).parent / "include"
    return [compiler, "-c", str(source), "-o", str(out), "-std=c++20", *build.FLAGS, *cpp_extension.COMMON_NVCC_FLAGS,
            "-gencode", "arch=compute_90,code=sm_90", "-Xcompiler", "-fPIC", "-I", str(build.HERE), "-I", str(root),
            "-I", str(root / "torch" / "csrc" / "api" / "include"), "-I", str(stub)]


def unity_source(sources: list[Path]) -> str:
    """One translation unit holding every .cu: each op's kernels header first (at namespace
    scope, as the build sees it), then each .cu in a namespace of its own, so that the host
    helpers each .cu keeps in an anonymous namespace do not collide. nvcc then reads PyTorch's
    headers once instead of once per source: on this 2-core machine the eight sources took
    about 300 CPU-seconds one by one and 70 in one unit; the kernels and host code compiled
    are the same, and nvcc's messages name the original files."""
    lines = ["#include <torch/library.h>", '#include "host.cuh"']
    lines += [f'#include "{source.with_suffix(".cuh")}"' for source in sources if source.with_suffix(".cuh").exists()]
    for source in sources:
        lines += [f"namespace unity_{source.parent.name} {{", f'#include "{source}"', "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.slow
def test_every_cuda_source_compiles_for_sm90_without_warnings(tmp_path):
    compiler = _nvcc_or_skip()
    stub = tmp_path / "stub"
    (stub / "c10" / "cuda" / "impl").mkdir(parents=True)
    (stub / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").write_text(
        "#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    sources = build.sources()
    assert sources, "no .cu files under impls/"
    unity = tmp_path / "all_sources.cu"
    unity.write_text(unity_source(sources))
    proc = subprocess.run(_compile_command(compiler, unity, tmp_path / "all_sources.o", stub), capture_output=True,
                          text=True)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"the CUDA sources do not compile:\n{output[-3000:]}"
    assert "warning" not in output.lower(), f"the CUDA sources compile with warnings:\n{output[-3000:]}"


def test_every_op_of_the_catalogue_has_its_cuda_kernels_registered():
    registry.ops()
    expected = {("copy", "-"), ("scale", "naive"), ("scale", "tuned"), ("sum", "naive"), ("sum", "two_pass"),
                ("sum", "atomic"), ("max", "two_pass"), ("max", "atomic"), ("rmsnorm", "naive"),
                ("rmsnorm", "tuned"), ("softmax", "three_pass"), ("softmax", "online"), ("softmax", "on_chip"),
                ("layernorm", "welford"), ("layernorm", "two_pass"), ("layernorm", "unsafe"),
                ("rmsnorm_silu_mul_add", "fused"), ("rmsnorm_silu_mul_add", "unfused")}
    for op in {op for op, _ in expected}:
        impls, failures = registry.load_impls(op, ["cuda"])
        assert not failures, failures
    found = {(k[0], k[2]) for k in registry.registered() if k[1] == "cuda"}
    assert expected <= found, expected - found
    assert registry.role_of("cuda") == registry.OURS


def test_the_cuda_framework_says_why_it_cannot_run_on_a_cpu():
    reason = registry.frameworks()["cuda"].unusable(torch.device("cpu"))
    assert reason and "NVIDIA GPU" in reason


def test_without_nvcc_the_cuda_impls_are_skipped_saying_so(monkeypatch):
    """The plan asks no build (it starts with the run: tests/test_first_run.py, where a failed
    build skips the cases), only whether there is a compiler to build with."""
    def missing():
        raise build.BuildError("nvcc was not found (set CUDA_HOME or put nvcc on PATH): the CUDA kernels need it")
    monkeypatch.setattr(build, "nvcc_version", missing)
    monkeypatch.delenv(build.PREBUILT_ENV, raising=False)
    reason = registry.frameworks()["cuda"].unusable(torch.device("cuda"))
    assert reason.startswith("nvcc was not found")


def test_the_build_is_named_by_what_decides_the_binary(monkeypatch):
    if build.nvcc() is None:
        pytest.skip("no nvcc here")
    first = build.build_hash()
    assert build.build_hash() == first
    monkeypatch.setenv(build.ARCH_ENV, "9.0 10.0")
    assert build.build_hash() != first
    monkeypatch.setenv(build.ARCH_ENV, "sm90")
    with pytest.raises(build.BuildError, match="compute capabilities"):
        build.arch()
    monkeypatch.setenv(build.ARCH_ENV, "7.5 9.0")
    with pytest.raises(build.BuildError, match="8.0 and newer"):
        build.arch()


def test_a_kept_build_is_found_without_compiling(monkeypatch, tmp_path):
    if build.nvcc() is None:
        pytest.skip("no nvcc here")
    kept = tmp_path / build.build_hash()
    kept.mkdir()
    (kept / f"{build.NAME}.so").write_bytes(b"")
    (kept / build.DONE).write_text("52.4\n")
    monkeypatch.setenv(build.PREBUILT_ENV, str(tmp_path))
    monkeypatch.setattr("torch.utils.cpp_extension.load", lambda *a, **k: pytest.fail("compiled a kept build"))
    assert build.build() == kept / f"{build.NAME}.so"


def test_a_row_kernel_has_configs_for_every_row_length_and_holds_the_row_where_asked():
    from impls._frameworks.cuda.rows import MAX_THREADS, configs
    source = (build.HERE / "rows.cuh").read_text()
    assert "packs == 1 || packs == 2 ? 1024 : 512" in source and MAX_THREADS == {0: 512, 1: 1024, 2: 1024, 4: 512,
                                                                                8: 512}
    for cols in (1, 7, 127, 781, 1000, 4096, 8192, 16384, 65536, 262144, 4000037):
        for itemsize in (2, 4):
            n = 16 // itemsize
            packs = -(-cols // n)
            kept, looped = configs(cols, itemsize, looped=False), configs(cols, itemsize, kept=False)
            assert looped, (cols, itemsize)
            assert all(c["packs"] == 0 and c["trip"] in (1, 2, 4) for c in looped)
            for c in kept:   # the registers hold the whole row, and no more than twice it
                assert c["packs"] * c["group"] >= packs and c["packs"] in (1, 2, 4, 8) and "trip" not in c
            for c in kept + looped:   # a block the kernel was compiled for (rows.cuh max_threads)
                assert c["threads"] % c["group"] == 0 and c["threads"] % 32 == 0
                assert c["threads"] <= MAX_THREADS[c["packs"]], c
            if cols <= 16384:
                assert kept, (cols, itemsize)


def test_every_row_config_runs_one_of_the_kernel_shapes_cupy_compiles_ahead():
    """CuPy compiles every (packs, trip) of rows.kernel_shapes once per template and dtype,
    whatever the row length: every config of every row length is one of them, and each shape
    is some row length's config."""
    from impls._frameworks.cuda.rows import configs, kernel_shapes, trip_of
    for kept, looped in ((True, True), (True, False), (False, True)):
        used = set()
        for cols in (1, 7, 127, 781, 1000, 4096, 8192, 16384, 65536, 262144, 4000037):
            for itemsize in (2, 4):
                for c in configs(cols, itemsize, kept, looped):
                    assert (c["packs"], trip_of(c)) in kernel_shapes(kept, looped), (cols, itemsize, c)
                    used.add((c["packs"], trip_of(c)))
        assert used == set(kernel_shapes(kept, looped)), (kept, looped, used)


def test_a_looped_row_offers_every_trip_its_threads_can_fill_and_the_kernels_build_those():
    """Each looped (group, block) comes with trips 1, 2 and 4 up to the first that takes a
    thread's whole row in one trip (a larger one makes the same loads holding more registers);
    at the large rows of issue #34 every looped group below 512 threads a row offers all three.
    The trips offered are the ones host.cuh dispatches and rows.cuh accepts."""
    from impls._frameworks.cuda.rows import TRIPS, configs
    assert TRIPS == (1, 2, 4)
    host, device = (build.HERE / "host.cuh").read_text(), (build.HERE / "rows.cuh").read_text()
    for trip in TRIPS:
        assert f"case {trip}: {{ constexpr int P = 0, TRIP = {trip};" in host
    assert "TRIP == 1 || TRIP == 2 || TRIP == 4" in device
    for cols in (7, 781, 4096, 8192, 16384, 65536):
        for itemsize in (2, 4):
            per_thread = {}
            for c in configs(cols, itemsize, kept=False):
                per_thread.setdefault((c["group"], c["threads"]), []).append(c["trip"])
            assert per_thread, (cols, itemsize)
            packs = -(-cols // (16 // itemsize))
            for (group, _), trips in per_thread.items():
                reads = -(-packs // group)
                assert trips == [t for t in TRIPS if t == 1 or t // 2 < reads], (cols, itemsize, group, trips)
    for cols, itemsize in ((4096, 2), (4096, 4), (8192, 2), (8192, 4), (16384, 2), (16384, 4)):
        offered: dict[int, list] = {}
        for c in configs(cols, itemsize):
            if c["packs"] == 0:
                offered.setdefault(c["group"], []).append(c["trip"])
        below = [trips for group, trips in offered.items() if group <= 128]
        assert len(below) >= 2 and all(trips == list(TRIPS) for trips in below), (cols, itemsize, offered)


def test_a_row_config_with_a_bad_trip_is_refused_before_any_launch():
    from impls._frameworks.cuda.rows import check, trip_of
    good = dict(group=256, packs=0, threads=256, trip=2)
    check(16, 8192, good, 2, "t")
    check(16, 8192, dict(group=256, packs=4, threads=256), 2, "t")
    assert trip_of(good) == 2 and trip_of(dict(group=256, packs=4, threads=256)) == 0
    for trip in (None, 0, 3, 8):
        bad = {**good, "trip": trip} if trip is not None else {k: v for k, v in good.items() if k != "trip"}
        with pytest.raises(ValueError, match=rf"t: a looped row \(packs 0\) reads 1, 2 or 4 packs a thread a trip, "
                                             rf"got trip {trip}"):
            check(16, 8192, bad, 2, "t")
    with pytest.raises(ValueError, match=r"t: a row kept in registers \(4 packs\) has no trip, got trip 4"):
        check(16, 8192, dict(group=256, packs=4, threads=256, trip=4), 2, "t")


def test_a_row_whose_last_pack_would_end_past_a_32_bit_index_is_refused():
    """rows.cuh tests a pack's end, (j + 1) * N <= cols, in 32 bits: a row of 2^31 - 1 elements
    would wrap it at its last pack. The host check (rows.py's, host.cuh's the same bound) takes
    rows up to 2^31 - 16 elements and refuses one more, in any dtype."""
    from impls._frameworks.cuda.rows import MAX_COLS, check
    assert MAX_COLS == 2 ** 31 - 16
    header = (Path(__file__).resolve().parent.parent / "impls/_frameworks/cuda/rows.cuh").read_text()
    assert "constexpr int64_t MAX_ROW_ELEMENTS = (int64_t{1} << 31) - 16;" in header
    host = (Path(__file__).resolve().parent.parent / "impls/_frameworks/cuda/host.cuh").read_text()
    assert "cols <= MAX_ROW_ELEMENTS" in host
    looped = dict(group=512, packs=0, threads=512, trip=1)
    for itemsize in (2, 4):
        check(1, MAX_COLS, looped, itemsize, "t")
        for cols in (MAX_COLS + 1, 2 ** 31 - 1, 0):
            with pytest.raises(ValueError, match=rf"t: rows of {cols} elements are not supported \(1 to 2\^31 - 16"):
                check(1, cols, looped, itemsize, "t")


def test_the_naive_sums_scratch_holds_every_pass_but_the_last():
    from impls.sum.cuda import naive_scratch

    def passes(n, threads):   # the kernel's own loop (sum.cu), in Python
        sizes = []
        while n > threads:
            n = -(-n // threads)
            sizes.append(n)
        return sizes
    for n in (1, 7, 256, 257, 65536, 65537, 1000003, 2 ** 28):
        assert naive_scratch(n, 256) >= sum(passes(n, 256))


def test_the_image_build_script_runs_the_same_build():
    proc = subprocess.run(["bash", "scripts/build-extensions", "--help"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent, env={**os.environ, "PYTHON": sys.executable})
    assert proc.returncode == 0, proc.stderr
    assert "impls/*/*.cu" in proc.stdout and "--out" in proc.stdout


def _schemas() -> dict[str, list[str]]:
    """Each op the .cu files register (TORCH_LIBRARY_FRAGMENT's m.def), its argument types."""
    import re
    found = {}
    for source in build.sources():
        for call in re.findall(r"m\.def\((.*?)\);", source.read_text(), re.S):
            schema = "".join(re.findall(r'"([^"]*)"', call))
            name, args = re.fullmatch(r"(\w+)\((.*)\) -> \(\)", schema).groups()
            assert name not in found, f"{name} registered twice"
            found[name] = [a.split()[0] for a in args.split(", ")]
    return found


class _SchemaCheckingOps:
    """Stands in for torch.ops.harness_cuda: each call must name a registered op and pass it
    arguments of the types its schema declares."""

    PYTHON_TYPES = {"Tensor": torch.Tensor, "int": int, "float": float, "bool": bool}

    def __init__(self):
        self.schemas, self.calls = _schemas(), []

    def __getattr__(self, name):
        def call(*args):
            assert name in self.schemas, f"torch.ops.harness_cuda.{name} is not registered by any .cu"
            types = self.schemas[name]
            assert len(args) == len(types), f"{name} takes {len(types)} arguments ({types}), got {len(args)}"
            for i, (arg, kind) in enumerate(zip(args, types)):
                want = self.PYTHON_TYPES[kind]
                ok = isinstance(arg, want) and not (want is int and isinstance(arg, bool))
                assert ok or (want is float and isinstance(arg, int)), f"{name} argument {i}: {kind}, got {arg!r}"
            self.calls.append(name)
        return call


def _sanitize_tool():
    """devtools/cuda-sanitize as a module (its file has no .py suffix)."""
    import importlib.machinery
    import importlib.util
    path = str(Path(__file__).resolve().parent.parent / "devtools" / "cuda-sanitize")
    loader = importlib.machinery.SourceFileLoader("cuda_sanitize", path)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("cuda_sanitize", loader))
    loader.exec_module(module)
    return module


def test_every_cuda_impl_calls_its_kernels_with_the_registered_signature(monkeypatch):
    """Each CUDA impl bound on the CPU in every config of the space each shape binds (as
    devtools/cuda-sanitize --every-config binds them, the config table not asked) and launched once
    against stand-ins that check the name, arity and argument types of every call."""
    from impls._frameworks.cuda import launch, rows
    ops = _SchemaCheckingOps()
    monkeypatch.setattr(build, "load", lambda: ops)
    monkeypatch.setattr(launch, "sm_count", lambda device: 132)
    specs = registry.ops()
    for op_name in specs:
        if "cuda" in registry.impl_modules(op_name):
            assert not registry.load_impls(op_name, ["cuda"])[1]
    for module in list(sys.modules.values()):   # put back what the tool replaces, after the test
        if getattr(module, "__name__", "").startswith("impls.") and hasattr(module, "chosen"):
            monkeypatch.setattr(module, "chosen", module.chosen)
    monkeypatch.setattr(rows, "choose", rows.choose)
    pick, spans = [0], []
    _sanitize_tool().every_config(pick, spans)
    keys = [k for k in registry.registered() if k[1] == "cuda"]
    assert keys
    configs = 0
    for op_name, _, variant in keys:
        spec = specs[op_name]()
        for shape in ([(1000,), (7,)] if spec.ndim == 1 else [(3, 781), (2, 16384), (1, 1)]):
            inputs = spec.inputs(shape, torch.bfloat16, "cpu", seed=1)
            out = spec.make_output(inputs)
            pick[0], span = 0, 1
            while pick[0] < span:
                spans.clear()
                before = len(ops.calls)
                registry.registered()[(op_name, "cuda", variant)].bind(**inputs, out=out)()
                assert len(ops.calls) > before, f"{op_name} {variant} config {pick[0]} launched nothing"
                span = max(spans, default=1)
                pick[0] += 1
            configs += span
    assert configs > 2 * len(keys) * 3, "the tool bound one config a shape: its spans were not seen"
    assert set(ops.calls) == set(ops.schemas), f"registered but never called: {set(ops.schemas) - set(ops.calls)}"


def test_the_row_launch_arguments_are_in_the_schemas_order():
    """rows.launch_args gives (group, threads, packs, trip) as every row op's schema names them:
    all four are ints, so the signature check cannot see them swapped."""
    import re

    from impls._frameworks.cuda.rows import launch_args
    assert launch_args(dict(group=64, threads=256, packs=0, trip=2)) == (64, 256, 0, 2)
    for op in ("rmsnorm", "layernorm", "softmax", "rmsnorm_silu_mul_add"):
        source = (Path(__file__).parents[1] / "impls" / op / f"{op}.cu").read_text()
        defs = ["".join(re.findall(r'"([^"]*)"', d)) for d in re.findall(r'm\.def\(((?:\s*"[^"]*")+)', source)]
        schemas = [s for s in defs if "int group" in s]
        assert schemas, op
        for schema in schemas:
            assert schema.endswith("int group, int threads, int packs, int trip) -> ()"), schema
