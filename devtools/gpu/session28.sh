#!/usr/bin/env bash
# One call on a fresh H200 host (issues 32, 34, 35), from the repository root with
# PYTHONPATH=/tmp/site:$PWD, within ~400 s; everything comes back packed in $OUT/out.tgz:
# 1. `harness op=rmsnorm impl=all` cold (fresh HARNESS_CACHE, fresh machine: Triton's,
#    Inductor's and CuPy's caches empty too), cut at COLD_S, then warm (where WARM_S is given), cut at it, with each
#    tuning key's split (first-run.sh's lines; devtools/first-run's table);
# 2. Numba's row ops at 32768x4096 and 1823x781 in bf16 and fp32 (NUMBA_S), Numba's GPU tests;
# 3. every CUDA kernel in every config at odd sizes and offsets (the looped row path changed);
# 4. Triton's row kernels as shipped (one binary per config) beside Triton's default
#    specialisation, side by side at the large cases of docs/results/h200.jsonl (no-loss rule).
source "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,uuid,clocks.max.memory --format=csv | tee "$OUT/gpu.txt"
export PYTHONUNBUFFERED=1
COLD=${COLD_S:-150} WARM=${WARM_S:-0}
step cold $((COLD + 15)) python3 devtools/first-run run "$OUT/first-run.jsonl" --ops rmsnorm --phases cold \
  --cache "$HARNESS_CACHE" --runs /tmp/first-run-runs --limit "$COLD"
[ "${WARM}" != 0 ] && step warm $((WARM + 15)) python3 devtools/first-run run "$OUT/first-run.jsonl" --ops rmsnorm --phases warm \
  --cache "$HARNESS_CACHE" --runs /tmp/first-run-runs --limit "$WARM"
cp /tmp/first-run-runs/rmsnorm-cold/results.jsonl "$OUT/rmsnorm-cold.jsonl" 2>/dev/null
cp /tmp/first-run-runs/rmsnorm-warm/results.jsonl "$OUT/rmsnorm-warm.jsonl" 2>/dev/null
python3 devtools/first-run table "$OUT/first-run.jsonl" | tee "$OUT/first-run.md"
python3 - "$OUT/first-run.jsonl" > "$OUT/tuning-seconds.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    row = json.loads(line)
    print(f"{row['op']} {row['phase']}: {row['seconds']} s{' (cut)' if row['cut'] else ''}, {row['cases']} cases")
    for k in sorted(row["tuning"], key=lambda k: -k["seconds"]):
        print(f"  {k['seconds']:6.2f} s (building {k.get('seconds_building')}, timing {k.get('seconds_timing')}; "
              f"{k.get('timing_tally')}) {k['impl']} {k['variant']} {k['dtype']} {(k.get('problems') or {}).get('us')}")
PY
head -40 "$OUT/tuning-seconds.txt"
harness numba ${NUMBA_S:-50} "op=[softmax,rmsnorm,layernorm,rmsnorm_silu_mul_add]" impl=numba \
  "dtype=[bf16,fp32]" "shapes=[[32768,4096],[1823,781]]"
step numba-tests ${NUMBA_TESTS_S:-75} python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py --durations=5 \
  -k "numba and (full_size or odd_offsets or disk_cache)"
step cuda-configs ${CUDA_CONFIGS_S:-35} python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k test_the_cuda_kernels_are_right
# the 32768x4096 cases first: LayerNorm's 16-bit choices there are two-row tiles (where the SASS differs)
grep '"shape": \[32768, 4096\]' docs/results/h200.jsonl > /tmp/ab-cases.jsonl
step triton-ab ${AB_S:-30} python3 devtools/gpu/triton-keys-ab.py /tmp/ab-cases.jsonl
python3 scripts/summarize "$OUT"/numba.jsonl --frameworks 32768x4096 2>&1 | tee "$OUT/numba.md"
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
