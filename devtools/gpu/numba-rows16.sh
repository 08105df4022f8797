#!/usr/bin/env bash
# Issue 35, the Numba row kernels with fewer registers (a kernel per keep: the row kept in
# registers, cached or read again; 16-byte chunks as 32-bit words at a 32-bit offset; a kept
# 16-bit row as its raw words), on the H200, from the repository root on a bare GPU host with
# PYTHONPATH=/tmp/site:$PWD. Within 300 s (each step's limit cut to what is left of BUDGET_S);
# everything comes back in $OUT/out-numba-rows16.tgz:
# 1. the four row ops at 32768x4096, bf16, fp16 and fp32, impl=numba (tuning included), then
#    each framework's best % of roof (scripts/summarize --frameworks) and, per case, the
#    chosen config and every tuned candidate's registers and time;
# 2. every Numba GPU test (full-size checks, odd sizes on misaligned views, the disk cache);
# 3. the keeps' bits on the GPU: kept, cached and read again give the same bits for the same
#    group (tests/test_gpu.py's keeps test; bf16 and fp32, rows of 4096 and 4100 columns).
# ROWS16_STEPS: the steps to run (default all: rows tests keeps); a fresh machine compiles
# every kernel cold, so a step cut at its limit can run alone in a call of its own.
source "$(dirname "$0")/steps.sh"
BUDGET_S=${BUDGET_S:-295}
left() { local want=$1 rest=$((BUDGET_S - SECONDS)); echo $(( rest < want ? (rest > 5 ? rest : 5) : want )); }
wanted() { [[ " ${ROWS16_STEPS:-rows tests keeps} " == *" $1 "* ]]; }

python3 -c "import numba, numba_cuda; print('numba', numba.__version__, 'numba-cuda', numba_cuda.__version__)" \
  | tee "$OUT/versions.txt"
git log --oneline -1 | tee -a "$OUT/versions.txt"

# 1. The row ops in the three dtypes.
if wanted rows; then
harness numba-rows16 "$(left 165)" "op=[rmsnorm,softmax,layernorm,rmsnorm_silu_mul_add]" impl=numba \
  "dtype=[bf16,fp16,fp32]" "shapes=[[32768,4096]]"
python3 scripts/summarize "$OUT"/numba-rows16.jsonl --frameworks 32768x4096 2>&1 | tee "$OUT/numba-rows16.md"   # bf16 / fp32
# fp16 and each candidate's registers: the records themselves
python3 - "$OUT/numba-rows16.jsonl" > "$OUT/rows16-summary.txt" 2>&1 <<'PY'
import json, sys
from pathlib import Path
path = Path(sys.argv[1])
if not path.exists():
    sys.exit(f"{path}: no results")
for line in path.read_text().splitlines():
    r = json.loads(line)
    cfg = {k: v for k, v in (r.get("impl_config") or {}).items() if k in ("group", "threads", "cached", "kept", "whole")}
    pct = r.get("pct_roof")
    print(f"{r.get('op'):22s} {str(r.get('variant')):10s} {r.get('dtype'):9s} {r.get('status'):5s} "
          f"{pct if pct is None else round(pct, 1)}% {cfg}")
    for c in (r.get("tuning") or {}).get("candidates", []):
        print("      ", {k: c.get(k) for k in ("group", "threads", "cached", "kept", "regs", "us")})
PY
grep -v "^ " "$OUT/rows16-summary.txt" | head -40
fi

# 2. Every Numba GPU test.
wanted tests && step numba-tests "$(left 90)" python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k numba --durations=10

# 3. The keeps' bits on the GPU.
wanted keeps && step numba-keeps "$(left 60)" python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py \
  -k where_it_is_kept
echo "exit status $status after $SECONDS s" | tee -a "$OUT/steps.log"
exit $status
