"""devtools/ on a CPU: compiled-code names a bad argument and what it needs; gpu-run checks
its steps and its OUT before it installs or runs anything."""
import os
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


