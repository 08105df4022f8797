#!/usr/bin/env bash
# What the open issues still need measured on the H200, from the repository root on a bare GPU host with
# PYTHONPATH=/tmp/site:$PWD, within ~8 minutes (limits add to 495 s); everything comes back in
# $OUT/out-open-checks.tgz:
# 1. the CUDA build (~50 s cold);
# 2. memcheck of the 1-D CUDA kernels (copy, scale, sum; the row ops and max ran clean at
#    ea6f187: 2,904 launches, 0 errors) at odd sizes on views at odd offsets;
# 3. the longest CUDA row (long-row.py: 2^31 - 16 elements and one fewer, random signs, every
#    trip, against float64; 2^31 - 15 refused);
# (Nsight Compute on the cases where CUDA stays short of Triton: sass-reasons.sh, a call of its own.)
# 4. Numba's row ops at 16384x8192 and 8192x16384, bf16 and fp32 (their per-keep kernels
#    measured at 32768x4096 only);
# 5. Numba's keeps' bits on the GPU (kept, cached and read again give the same bits) and its
#    disk cache; the CuPy GPU tests (4 processes on the one GPU: correctness, not timing).
source "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,uuid,clocks.max.memory --format=csv | tee "$OUT/gpu.txt"
git log --oneline -1 | tee "$OUT/version.txt"
export PYTHONUNBUFFERED=1
step cuda-build 90 python3 -m impls._frameworks.cuda.build
step memcheck-1d 60 compute-sanitizer --tool memcheck --error-exitcode 3 python3 devtools/cuda-sanitize copy scale sum
step long-row 75 python3 devtools/gpu/long-row.py
harness numba-rows 120 "op=[rmsnorm,softmax,layernorm,rmsnorm_silu_mul_add]" impl=numba "dtype=[bf16,fp32]" \
  "shapes=[[16384,8192],[8192,16384]]"
step numba-tests 50 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -k "where_it_is_kept or disk_cache"
step cupy-tests 100 python3 -m pytest -q -p no:cacheprovider -n 4 -m gpu tests/test_gpu.py -k cupy
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
