"""devtools/ on a CPU: compiled-code names a bad argument and what it needs; gpu-run checks
its steps and its OUT before it installs or runs anything."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
GPU_RUN = ROOT / "devtools" / "gpu-run"


@pytest.mark.parametrize("args, message", [
    ([], "usage"),
    (["layer_norm", "16x4096", "bf16"], "unknown op 'layer_norm'"),
    (["layernorm", "16by4096", "bf16"], "is not ROWSxCOLS"),
    (["layernorm", "16x4096", "bf17"], "unknown dtype 'bf17'"),
    (["layernorm", "4096", "bf16"], "layernorm"),
])
def test_compiled_code_names_a_bad_argument(args, message):
    proc = subprocess.run([sys.executable, str(ROOT / "devtools" / "compiled-code"), *args], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr[-2000:]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: it would compile")
def test_without_a_gpu_compiled_code_names_what_it_needs():
    proc = subprocess.run([sys.executable, str(ROOT / "devtools" / "compiled-code"), "layernorm", "1823x781", "bf16"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "needs a CUDA GPU" in proc.stderr, proc.stderr[-2000:]


def gpu_run(cwd: Path, *args: str, out: Path | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    if out is not None:
        env["OUT"] = str(out)
    return subprocess.run(["bash", str(GPU_RUN), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=60)


def test_gpu_run_refuses_to_start_without_out(tmp_path):
    proc = gpu_run(tmp_path, "tests", out=None)
    assert proc.returncode != 0 and "set OUT" in proc.stderr, proc.stderr


@pytest.mark.parametrize("args, message", [
    (["test"], "unknown step test"),
    (["tests", "-k", "roof", "bogus"], "unknown step bogus"),
    (["sweep", "all", "400s", "op=all"], "SECONDS must be a whole number, got '400s'"),
    (["sweep"], "sweep needs a NAME"),
])
def test_gpu_run_names_a_bad_step_before_running_anything(tmp_path, args, message):
    """Exit 2 naming the step, and nothing done: no log in OUT, no wheel installed (a .whl
    folder that pip would refuse is there)."""
    (tmp_path / ".whl").mkdir()
    (tmp_path / ".whl" / "broken-0-py3-none-any.whl").write_text("not a wheel")
    out = tmp_path / "out"
    out.mkdir()
    proc = gpu_run(tmp_path, *args, out=out)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert list(out.iterdir()) == []


def test_gpu_run_exits_with_the_worst_step_s_status(tmp_path):
    """A sweep that fails followed by one that passes still fails the whole call: the later
    step does not hide it. (A stand-in python3 on PATH: the harness 'fails' on op=bad.)"""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python3"
    fake.write_text('#!/bin/sh\ncase "$*" in *op=bad*) exit 3 ;; esac\nexit 0\n')
    fake.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "OUT": str(out), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", str(GPU_RUN), "sweep", "a", "5", "op=bad", "sweep", "b", "5", "op=good"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    log = (out / "log").read_text()
    assert "sweep a: exit 3" in log and "sweep b: exit 0" in log, log
    assert proc.returncode == 3, log


def test_numba_sass_shows_the_row_kernels_moving_16_bytes_a_load():
    """devtools/numba-sass compiles rmsnorm's Numba kernels to SASS (sm_90, no GPU): every
    global load and store of the whole-row kernel is 16 bytes wide (LDG.E.128/STG.E.128, none of
    8 bytes), in bf16 and fp32, for each keep (kept in registers, cached, read again), and it
    names a bad op. With nvcc (--cuda) it shows the CUDA kernels beside them, as rows.cuh
    declares them (Row<T, P, TRIP, W>): the looped one's loops per value of its TRIP packs."""
    import shutil
    home = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin"
    if not ((home / "ptxas").exists() or shutil.which("ptxas")):
        pytest.skip("no ptxas (a CUDA toolkit) to compile PTX to SASS")
    with_cuda = (home / "nvcc").exists() or bool(shutil.which("nvcc"))
    tool = str(ROOT / "devtools" / "numba-sass")
    proc = subprocess.run([sys.executable, tool, *(["--cuda"] if with_cuda else []), "rmsnorm"], capture_output=True,
                          text=True, timeout=300)
    if proc.returncode and "Failure finding" in proc.stdout + proc.stderr:   # no NVRTC/libnvvm for Numba
        pytest.skip(f"Numba cannot compile here: {(proc.stdout + proc.stderr)[-500:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    kernels = [line for line in proc.stdout.splitlines() if line.startswith("numba rmsnorm")]
    assert len(kernels) == 6, proc.stdout
    for line in kernels:
        assert "LDG.E.128" in line and "STG.E.128" in line and ".64 " not in line.split("instructions;")[1], line
    assert "loop of" in proc.stdout, proc.stdout
    if with_cuda:
        reports, name = {}, None      # each CUDA kernel's loop lines
        for line in proc.stdout.splitlines():
            if line.startswith("cuda void "):
                name = line.split(":")[0].removeprefix("cuda void ")
                reports[name] = []
            elif line.startswith("  loop of") and name:
                reports[name].append(line)
            elif not line.startswith("  "):
                name = None
        assert set(reports) == {"rmsnorm_rows<__nv_bfloat16, 4, 0, true>", "rmsnorm_rows<__nv_bfloat16, 0, 4, true>",
                                "rmsnorm_rows<float, 4, 0, true>"}, proc.stdout
        looped = reports["rmsnorm_rows<__nv_bfloat16, 0, 4, true>"]
        assert looped, proc.stdout
        for line in looped:   # 4 packs of 8 bf16 a trip: 32 values
            size, per_value = re.match(r"\s+loop of (\d+) \(([\d.]+)/value\)", line).groups()
            assert f"{int(size) / 32:.1f}" == per_value, line
    bad = subprocess.run([sys.executable, tool, "rmsnrom"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "unknown op rmsnrom" in bad.stderr, bad.stderr


def test_cuda_looped_tables_give_the_ratio_the_choice_by_trip_and_bits_a_trip_changed(tmp_path):
    """devtools/gpu/cuda-tables.py on records as the harness writes them: the CUDA/Triton ratio
    is Triton's median over CUDA's fastest passing variant (a negative control never counts),
    each trip's fastest looped candidate is named with its registers, and candidates of one
    group that wrote different bits are called out (a trip that is not bit-neutral)."""
    import json

    def cand(group, packs, trip, us, bits):
        return {"group": group, "packs": packs, "threads": 256, **({"trip": trip} if trip else {}), "us": us,
                "mid_us": None, "small_us": None, "bits": bits}
    case = {"op": "rmsnorm", "shape": [8192, 16384], "dtype": "float32", "status": "ok"}
    candidates = [cand(128, 0, 1, 100.0, "aa"), cand(128, 0, 2, 104.0, "aa"), cand(128, 0, 4, 110.0, "bb"),
                  cand(128, 8, None, 101.0, "aa")]
    found = [{**case, "impl": "cuda", "variant": "tuned", "median_us": 100.0, "pct_roof": 97.0,
              "impl_config": {"group": 128, "packs": 0, "threads": 256, "trip": 1},
              "tuning": {"source": "measured", "candidates": candidates}},
             {**case, "impl": "cuda", "variant": "block_per_row", "median_us": 50.0, "negative_control": True},
             {**case, "impl": "triton", "variant": "-", "median_us": 97.0, "pct_roof": 100.0}]
    results = tmp_path / "r.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in found))
    regs = tmp_path / "res.txt"
    regs.write_text(" Function void hk::rmsnorm_rows<float, 0, 1, true>(float const*, float const*, float*, long, "
                    "int, float, int):\n  REG:27 STACK:0 SHARED:128\n")
    proc = subprocess.run([sys.executable, str(ROOT / "devtools" / "gpu" / "cuda-tables.py"), str(results),
                           "--regs", str(regs)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "| rmsnorm | 8192x16384 | float32 | tuned | group=128 packs=0 threads=256 trip=1 | 100.0 |" in proc.stdout
    assert proc.stdout.splitlines()[2].endswith("| 0.970 |"), proc.stdout
    assert "| 128 | 0 | 256 | 1 | 27 | 100.0 | - | - | aa | chosen |" in proc.stdout, proc.stdout
    assert "trip 1: 100.0 us" in proc.stdout and "trip 4: 110.0 us" in proc.stdout
    assert "bits per group: DIFFER: {128: ['aa', 'bb']}" in proc.stdout, proc.stdout


def test_the_gpu_scripts_parse_and_name_only_files_that_exist():
    """A GPU call costs minutes of a session's device time: a script that fails on a syntax
    error or a moved file must fail here first. Every shell script parses (bash -n), every
    Python one compiles, and every devtools/ or tests/ path a script names exists."""
    gpu = ROOT / "devtools" / "gpu"
    scripts = sorted(gpu.glob("*.sh"))
    assert scripts
    for script in scripts:
        proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, f"{script.name}: {proc.stderr}"
        for path in re.findall(r"\b((?:devtools|tests)/[\w./-]+\w)", script.read_text()):
            assert (ROOT / path).exists(), f"{script.name} names {path}, which does not exist"
    for script in sorted(gpu.glob("*.py")):
        compile(script.read_text(), str(script), "exec")


def numba_sass_module():
    """devtools/numba-sass as a module (a script without .py), for its SASS readers."""
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("numba_sass", str(ROOT / "devtools" / "numba-sass"))
    spec = importlib.util.spec_from_loader("numba_sass", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_numba_sass_counts_loads_in_flight_and_blocks_an_sm():
    """The readers behind --triton/--cuda on SASS written out: a batch of loads ends at the
    first instruction that reads any of them (a 128-bit load's four registers, a 64-bit
    operand's two, a store's data), each counted by cache hint; an SM of sm_90 holds blocks
    by registers in units of 256 a warp, by warps, by shared memory."""
    ns = numba_sass_module()
    sass = [(0x00, "LDG.E.EL.128 R8, desc[UR4][R2.64]"), (0x10, "@!P1 LDG.E.EL.128 R12, desc[UR4][R2.64+0x10]"),
            (0x20, "LDG.E.128.CONSTANT R16, desc[UR4][R4.64]"), (0x30, "IMAD R20, R21, R22, RZ"),
            (0x40, "FADD R23, R23, R11"),      # reads the first load's last register: the batch ends
            (0x50, "LDG.E.EF.128 R8, desc[UR4][R6.64]"), (0x60, "FMUL R24, R15, R15"),   # the old batch's: no end
            (0x70, "STG.E.128 desc[UR4][R6.64], R8"),   # a store's data: ends the second batch
            (0x80, "LDG.E R30, desc[UR4][R2.64]"), (0x90, "IADD3 R31, R29.64, RZ, RZ")]   # R29.64 reads R30
    assert ns.loads_in_flight(sass) == ["2 EL+1 CONSTANT", "1 EF", "1"]
    assert ns.first_load([ns.operands(t)[0] for _, t in sass[3:]]) == 2
    assert ns.blocks_per_sm(62, 1088, 512) == (2, "registers")   # 64 a thread allocated: 32 warps
    assert ns.blocks_per_sm(32, 1056, 256) == (8, "registers and warps")
    assert ns.blocks_per_sm(24, 1056, 256) == (8, "warps")
    assert ns.blocks_per_sm(16, 40 * 1024, 128) == (5, "shared memory")
    assert ns.parse_config("loop_block=4096, num_warps=16 early hints=plain") == {
        "loop_block": 4096, "num_warps": 16, "early": True, "hints": "plain"}
    assert ns.parse_config('{"group": 128, "packs": 4}') == {"group": 128, "packs": 4}


def test_numba_sass_shows_a_named_config_of_triton_and_cuda():
    """--triton compiles a Triton row kernel at a named config as the harness binds it, for
    sm_90 with no GPU: RMSNorm's looped 4096-column tiles on 16 warps with EARLY over a
    16384-column fp32 row (SPAN: the column loops unrolled) put all 8 of a thread's first-pass
    loads out at once, evict_last, with no loop left. --cuda compiles the CUDA kernel the
    extension launches for a config (here the row kept in registers, 8 packs: 8 loads out at
    once). A bad dtype is named."""
    import shutil
    tool = str(ROOT / "devtools" / "numba-sass")
    pytest.importorskip("triton")
    proc = subprocess.run([sys.executable, tool, "--triton", "rmsnorm", "float32", "8192x16384",
                           "loop_block=4096,num_warps=16,early"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "SPAN=16384" in out and "512 threads" in out and "loop of" not in out, out
    assert re.search(r"in flight before a use: 8 EL \|", out), out
    assert re.search(r"\d+ registers, \d+ bytes shared: \d blocks \(\d+ warps\) an SM", out), out
    home = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin"
    if (home / "nvcc").exists() or shutil.which("nvcc"):
        cuda = subprocess.run([sys.executable, tool, "--cuda", "rmsnorm", "fp16", "8192x16384",
                               "group=256,packs=8,threads=256"], capture_output=True, text=True, timeout=300)
        assert cuda.returncode == 0, cuda.stderr[-3000:]
        assert "rmsnorm_rows<__half, 8, 0, true>" in cuda.stdout and "256 threads" in cuda.stdout, cuda.stdout
        assert re.search(r"in flight before a use: 8 CONSTANT", cuda.stdout), cuda.stdout
    bad = subprocess.run([sys.executable, tool, "--triton", "rmsnorm", "fp8", "8x16", "num_warps=4"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "unknown dtype fp8" in bad.stderr, bad.stderr


def test_profile_cases_pins_a_record_s_config():
    """devtools/gpu/profile-cases.py takes a case's config as JSON after its shape (colons and
    all) and, while pinned, the row tuner answers every key and batch with it, untuned; the
    tuner is itself again afterwards."""
    import importlib.util

    from harness import tuner
    spec = importlib.util.spec_from_file_location("profile_cases", ROOT / "devtools" / "gpu" / "profile-cases.py")
    profile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(profile)
    config = {"group": 512, "packs": 0, "threads": 512, "trip": 4}
    case = 'rmsnorm:cuda:tuned:float32:8192x16384:{"group": 512, "packs": 0, "threads": 512, "trip": 4}'
    assert profile.parse(case) == ("rmsnorm", "cuda", "tuned", "float32", (8192, 16384), config)
    assert profile.parse("layernorm:triton:two_pass:float16:32768x4096")[4:] == ((32768, 4096), None)
    kept = tuner.tune_rows, tuner.for_batch
    with profile.pinned(config):
        tuned = tuner.tune_rows(("cuda", "rmsnorm"), None)
        assert tuned.config == config and tuner.for_batch(tuned, ("cuda", "rmsnorm"), 3, None) == (config, {})
    assert (tuner.tune_rows, tuner.for_batch) == kept
