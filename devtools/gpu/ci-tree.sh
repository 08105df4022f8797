#!/usr/bin/env bash
# Branch s27-ci, on the H200, from the repository root on a bare GPU host with
# PYTHONPATH=/tmp/site:$PWD. The branch changes CPU-only paths: the interpreter's tree
# reduction (installed by the Triton framework's prepare on a CPU device only) and the
# interpreter's row tiles (row_block no longer takes custom_combine; on a GPU it returned
# ROW_TILE for looped rows before and does now). This checks that the GPU sees neither:
# the tree is not installed by prepare(cuda), and the Triton kernels whose launchers
# changed (softmax, LayerNorm) and the 1-D max still pass their GPU tests.
# Everything it writes is under $OUT; under 6 minutes (each step has its own limit).
source "$(dirname "$0")/steps.sh"

git log --oneline -1 | tee "$OUT/versions.txt"

step not-installed 60 python3 - <<'PY'
import torch
from harness.registry import frameworks
frameworks()["triton"].prepare(torch.device("cuda:0"))
from triton.runtime import interpreter
from impls._frameworks.triton.rows import ROW_TILE, row_block
installed = getattr(interpreter.ReduceOps.generic_reduce, "in_a_tree", False)
print("tree installed on cuda:", installed)
print("row_block(781, 4096, 40000):", row_block(781), row_block(4096), row_block(40000), "ROW_TILE", ROW_TILE)
assert not installed and row_block(40000) == (ROW_TILE, False) and row_block(781) == (1024, True)
PY
step gpu-tests 240 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py \
  -k "triton and (softmax or layernorm or max)" --durations=10
exit $status
