#!/usr/bin/env bash
# What session 28 left unmeasured (its note, "Next"), on a bare H200 host from the repository
# root with PYTHONPATH=/tmp/site:$PWD, within ~8 minutes (its limits add to 480 s); everything comes back in $OUT/out-pending.tgz:
# 1. the CUDA kernels session 28 changed (the row ops' looped path, max) in every config at odd
#    sizes and offsets, then under memcheck (the CUDA build first, ~47 s cold);
# 2. LayerNorm, softmax and the chain unspecialised beside specialised at 32768x4096
#    (triton-keys-ab.py: may they take rows.BATCH_ARGS?);
# 3. Numba's LayerNorm fp32 and chain at 32768x4096 (their 16-byte kernels never measured).
# The first run to its end is `COLD_S=300 WARM_S=125 EXHAUSTIVE_S=0 first-run.sh`, a call of its own.
# PENDING_STEPS: the steps to run (default all: cuda-configs memcheck triton-ab numba).
source "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,uuid,clocks.max.memory --format=csv | tee "$OUT/gpu.txt"
export PYTHONUNBUFFERED=1
wanted() { [[ " ${PENDING_STEPS:-cuda-configs memcheck triton-ab numba} " == *" $1 "* ]]; }
step cuda-build 90 python3 -m impls._frameworks.cuda.build
wanted cuda-configs && step cuda-configs ${CUDA_CONFIGS_S:-150} python3 devtools/cuda-sanitize --every-config \
  rmsnorm layernorm softmax rmsnorm_silu_mul_add max
wanted memcheck && step memcheck ${MEMCHECK_S:-90} compute-sanitizer --tool memcheck --error-exitcode 3 \
  python3 devtools/cuda-sanitize rmsnorm layernorm softmax rmsnorm_silu_mul_add max
if wanted triton-ab; then
  grep '"shape": \[32768, 4096\]' docs/results/h200.jsonl | grep -v '"op": "rmsnorm"' > /tmp/ab-cases.jsonl
  step triton-ab ${AB_S:-90} python3 devtools/gpu/triton-keys-ab.py /tmp/ab-cases.jsonl
fi
if wanted numba; then
  harness numba ${NUMBA_S:-60} "op=[layernorm,rmsnorm_silu_mul_add]" impl=numba "dtype=[bf16,fp32]" "shapes=[[32768,4096]]"
  python3 scripts/summarize "$OUT"/numba.jsonl --frameworks 32768x4096 2>&1 | tee "$OUT/numba.md"
fi
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
