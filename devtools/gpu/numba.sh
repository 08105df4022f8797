#!/usr/bin/env bash
# The Numba kernels on the H200 (issue 35), from the repository root on a bare GPU host with
# PYTHONPATH=/tmp/site:$PWD: compile every kernel cold and warm from the disk cache (timed),
# the Numba GPU tests, then the harness on every op with Numba, Triton and CUDA at the large
# sizes (bf16 and fp32). Everything it writes is under $OUT; about 6 minutes at most (each
# step has its own time limit, so a slow one costs its own results only).
set -uo pipefail
OUT=${OUT:?set OUT to the folder for the results}
export HARNESS_CACHE=${HARNESS_CACHE:-/tmp/hc}
mkdir -p "$OUT" "$HARNESS_CACHE"
status=0
step() {   # step NAME LIMIT_S COMMAND...: run it, log it, keep the worst exit status
  local name=$1 limit=$2; shift 2
  echo "== $name (limit ${limit}s): $*" | tee -a "$OUT/steps.log"
  local began=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "   exit $rc after $((SECONDS - began)) s" | tee -a "$OUT/steps.log"
  tail -5 "$OUT/$name.log"
  [ $rc -gt $status ] && status=$rc
  return 0
}

python3 -c "import numba, numba_cuda, numpy; print('numba', numba.__version__, 'numba-cuda', numba_cuda.__version__, 'numpy', numpy.__version__)" | tee "$OUT/versions.txt"

# 1. Compile: cold (a fresh disk cache), then warm in a new process (every kernel from the cache).
rm -rf "$HARNESS_CACHE/numba"
step compile-cold 60 python3 tests/numba_compile.py --gpu
step compile-warm 20 python3 tests/numba_compile.py --gpu
grep -h "numba:" "$OUT/compile-cold.log" "$OUT/compile-warm.log" | tee "$OUT/compile.txt"

# 2. The GPU tests that concern Numba: every variant at full size (checks, determinism, batch
#    invariance, the launcher's contract), odd sizes on misaligned views, the stream check
#    against Numba's default stream, the disk cache in a second process.
step gpu-tests 110 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "numba and not odd_offsets" --durations=20
step gpu-tests-views 40 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "numba and odd_offsets" --durations=5

# 3. The harness at the large sizes: Numba beside Triton and CUDA, bf16 and fp32.
step sweep-1d 45 python3 -m harness "op=[copy,scale,sum,max]" "impl=[numba,triton,cuda]" "dtype=[bf16,fp32]" \
  "shapes=[[268435456]]" tracking=none hydra.run.dir=/tmp/runs/numba-1d
step sweep-rows 75 python3 -m harness "op=[rmsnorm,softmax,layernorm,rmsnorm_silu_mul_add]" \
  "impl=[numba,triton,cuda]" "dtype=[bf16,fp32]" "shapes=[[32768,4096]]" tracking=none hydra.run.dir=/tmp/runs/numba-rows
step sweep-short-rows 20 python3 -m harness "op=[rmsnorm,softmax,layernorm]" impl=numba dtype=bf16 \
  "shapes=[[1823,781]]" tracking=none hydra.run.dir=/tmp/runs/numba-short
for run in numba-1d numba-rows numba-short; do
  [ -f "/tmp/runs/$run/results.jsonl" ] && cp "/tmp/runs/$run/results.jsonl" "$OUT/$run.jsonl"
  [ -f "/tmp/runs/$run/table.txt" ] && cp "/tmp/runs/$run/table.txt" "$OUT/$run-table.txt"
done
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
