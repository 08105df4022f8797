#!/usr/bin/env bash
# The Numba row kernels after the SASS work of issue 35 (32-bit in-row indices, whole-row
# kernels, rows kept in registers, bf16/fp16 pairs by one cvt, max.NaN), on the H200, from the
# repository root on a bare GPU host with PYTHONPATH=/tmp/site:$PWD: the harness at 32768x4096
# and 16384x8192 for the four row ops, Numba beside CUDA (the same run's roof), bf16 and fp32;
# every Numba GPU test; every Numba kernel compiled and loaded on the GPU; then each Numba
# candidate's registers, time and choice from the tuner's tables. Everything it writes is under
# $OUT; under 5 minutes (each step has its own limit, so a slow one costs its own results only).
source "$(dirname "$0")/steps.sh"

python3 -c "import numba, numba_cuda, numpy; print('numba', numba.__version__, 'numba-cuda', numba_cuda.__version__, 'numpy', numpy.__version__)" | tee "$OUT/versions.txt"
git log --oneline -1 | tee -a "$OUT/versions.txt"

# 1. The harness: Numba beside CUDA at the two large row shapes, bf16 and fp32 (tuning included).
step sweep-rows ${ROWS_S:-150} python3 -m harness "op=[rmsnorm,softmax,layernorm,rmsnorm_silu_mul_add]" \
  "impl=${ROWS_IMPLS:-[numba,cuda]}" "dtype=[bf16,fp32]" "shapes=${ROWS_SHAPES:-[[32768,4096],[16384,8192]]}" tracking=none \
  hydra.run.dir=/tmp/runs/numba-rows
[ -f /tmp/runs/numba-rows/results.jsonl ] && cp /tmp/runs/numba-rows/results.jsonl "$OUT/numba-rows.jsonl"
[ -f /tmp/runs/numba-rows/table.txt ] && cp /tmp/runs/numba-rows/table.txt "$OUT/numba-rows-table.txt"

# 2. Every Numba GPU test (full-size checks, determinism, batch invariance, the launcher's
#    contract, odd sizes on misaligned views: the kernels for any rows, the stream, the disk cache).
step gpu-tests 100 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k numba --durations=10

# 3. Every Numba kernel (both row kinds of each row op) compiled and loaded through its dispatcher.
step compile 40 python3 tests/numba_compile.py --gpu

# 4. Per case: % of roof, the chosen config, and every tuned candidate's registers and times.
python3 - > "$OUT/numba-rows-summary.txt" 2>&1 <<'PY'
import json
try:
    lines = open("/tmp/runs/numba-rows/results.jsonl").read().splitlines()
except OSError as e:
    raise SystemExit(f"no results: {e}")
for line in lines:
    r = json.loads(line)
    cfg = {k: v for k, v in (r.get("impl_config") or {}).items() if k not in ("numba", "numba_cuda", "cache", "build", "flags", "arch")}
    pct = r.get("pct_roof")
    print(f"{r.get('op'):22s} {r.get('impl'):6s} {str(r.get('variant')):10s} {r.get('dtype'):9s} {str(r.get('shape')):14s} "
          f"{r.get('status'):5s} {pct if pct is None else round(pct, 1)}% {cfg}")
    if r.get("impl") == "numba":
        for c in (r.get("tuning") or {}).get("candidates", []):
            print("      ", {k: c.get(k) for k in ("group", "threads", "cached", "kept", "regs", "us", "mid_us", "small_us")})
PY
cat "$OUT/numba-rows-summary.txt" | grep -v "^ " | head -40
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
