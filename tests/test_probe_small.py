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
