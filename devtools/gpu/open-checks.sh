#!/usr/bin/env bash
# What the open issues still need run on the H200, from the repository root on a bare GPU host with
# PYTHONPATH=/tmp/site:$PWD, within ~8 minutes (limits add to 495 s); everything comes back in
# $OUT/out-open-checks.tgz (memcheck of every CUDA kernel and Numba's row ops at 16384x8192 and
# 8192x16384 are done: f4da37c, issue notes):
# 1. the CUDA build (~50 s cold);
# 2. the extension's refusals as Python errors (a test, in a child process), then the longest
#    CUDA row (long-row.py: 2^31 - 16 elements and one fewer, ±1 inputs, every trip, against
#    float64; 2^31 - 15 refused, in a child process: that refusal segfaulted twice);
# 3. Numba's keeps' bits on the GPU (kept, cached and read again give the same bits) and its
#    disk cache (cut at 50 s with 8 passed at f4da37c);
# 4. the CuPy GPU tests (4 processes on the one GPU: correctness, not timing).
source "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,uuid,clocks.max.memory --format=csv | tee "$OUT/gpu.txt"
git log --oneline -1 | tee "$OUT/version.txt"
export PYTHONUNBUFFERED=1
step cuda-build 90 python3 -m impls._frameworks.cuda.build
step refusals 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -k refuses_a_bad_config
step long-row 75 python3 devtools/gpu/long-row.py
step numba-tests 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -k "where_it_is_kept or disk_cache"
step cupy-tests 120 python3 -m pytest -q -p no:cacheprovider -n 4 -m gpu tests/test_gpu.py -k cupy
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
