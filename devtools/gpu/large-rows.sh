#!/usr/bin/env bash
# The row ops at the three large shapes (32768x4096, 16384x8192, 8192x16384) in bf16, fp16 and
# fp32, CUDA beside Triton (issue 34's "within 3% of Triton at each case of 256 MiB or more"),
# then CuPy's and Numba's best there (issue 35), on a bare H200 host from the repository root
# with PYTHONPATH=/tmp/site:$PWD; within 9 minutes, each step under its own limit. Everything
# comes back packed in $OUT/out.tgz (steps.sh).
source "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,uuid,clocks.max.memory --format=csv | tee "$OUT/gpu.txt"
export PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/cupy-cache
LARGE="shapes=[[32768,4096],[16384,8192],[8192,16384]]"
OPS="op=[softmax,rmsnorm,layernorm,rmsnorm_silu_mul_add]"
harness cuda-triton ${CUDA_TRITON_S:-330} "$OPS" "impl=[cuda,triton]" "dtype=[bf16,fp16,fp32]" "$LARGE"
harness cupy-numba ${CUPY_NUMBA_S:-170} "$OPS" "impl=[cupy,numba]" "variant=[on_chip,three_pass,two_pass,welford,fused,raw]" \
  "dtype=[bf16,fp32]" "shapes=[[16384,8192],[8192,16384]]"
python3 scripts/summarize "$OUT"/*.jsonl --frameworks 32768x4096,16384x8192 > "$OUT/frameworks.md" 2>&1
python3 scripts/summarize "$OUT"/*.jsonl --frameworks 8192x16384 >> "$OUT/frameworks.md" 2>&1
cat "$OUT/frameworks.md"
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
