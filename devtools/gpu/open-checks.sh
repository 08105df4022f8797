#!/usr/bin/env bash
# What the open issues still need run on the H200, from the repository root on a bare GPU host with
# PYTHONPATH=/tmp/site:$PWD, within ~8 minutes (limits add to 465 s); everything comes back in
# $OUT/out-open-checks.tgz
# (memcheck of every CUDA kernel, the longest row's checks, Numba's keeps and disk cache and the
# CuPy GPU tests are done: the issue notes of sessions 34-35):
# 1. the CUDA build (~50 s cold);
# 2. why a refusal of the extension (TORCH_CHECK) segfaults there (refusal-crash.sh: the toolchain,
#    the library's unwind sections, tiny ops that throw, built by g++ and by nvcc);
# 3. the extension's refusals as Python errors (a test, in a child process: exit -11 on
#    06093cf), then the longest CUDA row with its refusal (long-row.py).
source "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,uuid,clocks.max.memory --format=csv | tee "$OUT/gpu.txt"
git log --oneline -1 | tee "$OUT/version.txt"
export PYTHONUNBUFFERED=1
step cuda-build 90 python3 -m impls._frameworks.cuda.build
step crash-probes 240 bash devtools/gpu/refusal-crash.sh
step refusals 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -k refuses_a_bad_config
step long-row 75 python3 devtools/gpu/long-row.py
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
