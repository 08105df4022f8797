#!/usr/bin/env bash
# The 16-bit exp of the CUDA softmax and chain kernels (issue 34), CuPy's idiomatic variants
# (issue 35) and Numba's per-variant row kernels, on a bare H200 host, from the repository root
# with PYTHONPATH=/tmp/site:$PWD; within 9.5 minutes, each step under its own limit:
#   1. the CUDA build in the background while the CuPy and Numba GPU tests run (every CuPy impl,
#      Numba's softmax and LayerNorm at full size through the harness's checks);
#   2. the harness at 32768x4096: softmax and the chain, CUDA beside CuPy (the same kernels through
#      NVRTC) and Triton, bf16, fp16, fp32; then RMSNorm and LayerNorm CUDA in fp16;
#   3. the changed kernels in every launch config on rows at odd offsets, then under memcheck;
#   4. Numba's four row ops at 32768x4096, bf16 and fp32;
#   5. CuPy's 1-D ops (idiomatic beside raw) and CUDA's in fp16 at 2^28 elements;
#   6. the burst timer's GPU tests (agreement with triton's do_bench, a slow host launch kept out).
# Writes under $OUT: each step's log, steps.log, and the runs' results as <run>.jsonl.
source "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,uuid,clocks.max.memory --format=csv | tee "$OUT/gpu.txt"
export PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/cupy-cache
python3 -m impls._frameworks.cuda.build > "$OUT/cuda-build.log" 2>&1 &
build=$!

step gpu-tests 140 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py --durations=10 \
  -k "full_size and (cupy or (numba and (softmax or layernorm)))"
wait $build; echo "cuda build exit $?" | tee -a "$OUT/steps.log"

ROWS="shapes=[[32768,4096]]"
harness rows-exp 120 "op=[softmax,rmsnorm_silu_mul_add]" "impl=[cuda,cupy,triton]" "variant=[three_pass,online,on_chip,fused]" \
  "dtype=[bf16,fp16,fp32]" "$ROWS"
step every-config 50 python3 devtools/cuda-sanitize --every-config softmax rmsnorm_silu_mul_add
step memcheck 50 compute-sanitizer --tool memcheck --error-exitcode 3 python3 devtools/cuda-sanitize softmax rmsnorm_silu_mul_add
harness numba-rows 60 "op=[softmax,layernorm,rmsnorm,rmsnorm_silu_mul_add]" impl=numba "dtype=[bf16,fp32]" "$ROWS"
harness cupy-idiomatic-rows 40 "op=[softmax,layernorm,rmsnorm,rmsnorm_silu_mul_add]" impl=cupy "variant=[idiomatic,naive]" \
  "dtype=[bf16,fp32]" "$ROWS"
harness flat 45 "op=[copy,scale,sum,max]" "impl=[cupy,cuda]" "dtype=[bf16,fp16,fp32]" "shapes=[[268435456]]"
harness cuda-fp16-rows 30 "op=[rmsnorm,layernorm]" impl=cuda dtype=fp16 "$ROWS"
step timer 40 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "timer_agrees or slow_host_launch"
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
