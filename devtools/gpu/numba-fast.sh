#!/usr/bin/env bash
# The Numba kernels that move 8-byte words (issue 35), on the H200, from the repository root
# on a bare GPU host with PYTHONPATH=/tmp/site:$PWD: compile every kernel cold and warm from
# the disk cache in a new process (timed), every Numba GPU test, then the harness at the
# large sizes for every op, Numba beside CUDA (the same run's roof), bf16 and fp32.
# Everything it writes is under $OUT; under 6 minutes (each step has its own limit, so a slow
# one costs its own results only).
source "$(dirname "$0")/steps.sh"

python3 -c "import numba, numba_cuda, numpy; print('numba', numba.__version__, 'numba-cuda', numba_cuda.__version__, 'numpy', numpy.__version__)" | tee "$OUT/versions.txt"
git log --oneline -1 | tee -a "$OUT/versions.txt"

# 1. Compile: cold (a fresh disk cache), then warm in a new process (every kernel from the cache).
rm -rf "$HARNESS_CACHE/numba"
step compile-cold 60 python3 tests/numba_compile.py --gpu
step compile-warm 20 python3 tests/numba_compile.py --gpu
grep -h "numba:" "$OUT/compile-cold.log" "$OUT/compile-warm.log" | tee "$OUT/compile.txt"

# 2. Every Numba GPU test (full-size checks, determinism, batch invariance, the launcher's
#    contract, odd sizes on misaligned views, the stream, the disk cache).
step gpu-tests 150 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k numba --durations=15

# 3. The harness at the large sizes: Numba beside CUDA, bf16 and fp32.
step sweep-1d 45 python3 -m harness "op=[copy,scale,sum,max]" "impl=[numba,cuda]" "dtype=[bf16,fp32]" \
  "shapes=[[268435456]]" tracking=none hydra.run.dir=/tmp/runs/numba-fast-1d
step sweep-rows 80 python3 -m harness "op=[rmsnorm,softmax,layernorm,rmsnorm_silu_mul_add]" \
  "impl=[numba,cuda]" "dtype=[bf16,fp32]" "shapes=[[32768,4096]]" tracking=none hydra.run.dir=/tmp/runs/numba-fast-rows
for run in numba-fast-1d numba-fast-rows; do
  [ -f "/tmp/runs/$run/results.jsonl" ] && cp "/tmp/runs/$run/results.jsonl" "$OUT/$run.jsonl"
  [ -f "/tmp/runs/$run/table.txt" ] && cp "/tmp/runs/$run/table.txt" "$OUT/$run-table.txt"
done
# The Numba kernels' registers per thread as compiled for the H200 (the tuner's tables hold
# them too): occupancy is what the word loads were meant to raise.
python3 - > "$OUT/registers.txt" 2>&1 <<'PY'
import json, glob
for path in sorted(glob.glob("/tmp/runs/numba-fast-*/results.jsonl")):
    for line in open(path):
        r = json.loads(line)
        if r.get("impl") == "numba":
            cfg = r.get("impl_config") or {}
            print(r.get("op"), r.get("variant"), r.get("dtype"), r.get("status"), r.get("pct_roof"), cfg)
PY
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
