"""scripts/probe-small (a GPU diagnostic): on a machine without CUDA it says so and stops."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the probe would run")
def test_without_a_gpu_the_probe_names_what_it_needs():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "probe-small")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0 and "needs a CUDA GPU" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.parametrize("args, message", [
    ([], "usage"),
    (["layer_norm", "16x4096", "bf16"], "unknown op 'layer_norm'"),
    (["layernorm", "16by4096", "bf16"], "is not ROWSxCOLS"),
    (["layernorm", "16x4096", "bf17"], "unknown dtype 'bf17'"),
    (["layernorm", "4096", "bf16"], "layernorm"),
])
def test_compiled_code_names_a_bad_argument(args, message):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "compiled-code"), *args], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr[-2000:]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: it would compile")
def test_without_a_gpu_compiled_code_names_what_it_needs():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "compiled-code"), "layernorm", "1823x781", "bf16"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "needs a CUDA GPU" in proc.stderr, proc.stderr[-2000:]
