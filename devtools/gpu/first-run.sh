#!/usr/bin/env bash
# First runs on the H200 (issue 32), from the repository root on a bare GPU host with
# PYTHONPATH=/tmp/site:$PWD: (1) `harness op=OP impl=all` with nothing cached, timed, for each op
# of FIRST_RUN_OPS (default rmsnorm; e.g. FIRST_RUN_OPS=softmax,sum: `op=all` is summed from
# calls of an op or a few, devtools/first-run table);
# (2) the same with its caches warm; (3) each tuning key's seconds, from the records' tuning
# tables; (4) the fast and exhaustive searches side by side at the 6 large rmsnorm cases
# (Triton; fp32 and bf16 at 32768x4096, 16384x8192, 8192x16384): the configs each chose and
# the medians each gave, minutes apart in one call (the no-loss rule: within 1%); before it, the
# first op's Numba and Triton cases, warm, under cProfile (where a framework's start goes).
# Everything lands under $OUT; about 8 minutes at most (each step has its own limit, and a
# step cut by it keeps what it measured: devtools/first-run sends the harness a SIGINT).
source "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,uuid,clocks.max.memory --format=csv | tee "$OUT/gpu.txt"

# 1-2. Cold (the op's cache emptied: roof, CUDA build, Numba and CuPy compiles, every tuning),
#      then warm (the same cache). devtools/first-run writes one line per run.
# FIRST_RUN_OVERRIDES: harness overrides for both runs, e.g. triton_compile=threads (an A/B of the
# Triton compile pool is this script twice, one call each).
OPS=${FIRST_RUN_OPS:-rmsnorm}
N_OPS=$(echo "$OPS" | tr ',' '\n' | wc -l)   # COLD_S and WARM_S are each op's limit
step cold $(((${COLD_S:-240} + 20) * N_OPS)) python3 devtools/first-run run "$OUT/first-run.jsonl" --ops "$OPS" --phases cold \
  --cache "$HARNESS_CACHE" --runs /tmp/first-run-runs --limit ${COLD_S:-240} -- ${FIRST_RUN_OVERRIDES:-}
step warm $(((${WARM_S:-125} + 15) * N_OPS)) python3 devtools/first-run run "$OUT/first-run.jsonl" --ops "$OPS" --phases warm \
  --cache "$HARNESS_CACHE" --runs /tmp/first-run-runs --limit ${WARM_S:-125} -- ${FIRST_RUN_OVERRIDES:-}
# Only the JSONLs come back: the GPU machine returns a limited number of files from $OUT.
for op in ${OPS//,/ }; do
  for phase in cold warm; do
    cp "/tmp/first-run-runs/$op-$phase/results.jsonl" "$OUT/$op-$phase.jsonl" 2>/dev/null
  done
done

# 3. Each tuning key's seconds (the cold run measured them all).
python3 - "$OUT/first-run.jsonl" > "$OUT/tuning-seconds.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    row = json.loads(line)
    keys = sorted(row["tuning"], key=lambda k: -k["seconds"])
    print(f"{row['op']} {row['phase']}: {row['seconds']} s{' (cut)' if row['cut'] else ''}, {row['cases']} cases, "
          f"{len(keys)} keys tuned")
    for k in keys:
        print(f"  {k['seconds']:6.2f} s (building {k.get('seconds_building')}, binding {k.get('seconds_binding')}, "
              f"timing {k.get('seconds_timing')}, digesting {k.get('seconds_digesting')}; {k.get('timing_tally')}) {k['search']} {k['impl']} "
              f"{k['variant']} {k['dtype']} {k['problems']}")
PY
cat "$OUT/tuning-seconds.txt"
python3 devtools/first-run table "$OUT/first-run.jsonl" | tee "$OUT/first-run.md"
# Where each run's case time went, per framework and phase (the records' seconds).
python3 - "$OUT"/*-cold.jsonl "$OUT"/*-warm.jsonl > "$OUT/phase-seconds.txt" 2>&1 <<'PY'
import json, sys
from collections import defaultdict
for path in sys.argv[1:]:
    sums, cases = defaultdict(lambda: defaultdict(float)), defaultdict(int)
    for line in open(path):
        r = json.loads(line)
        cases[r["impl"]] += 1
        for phase, s in (r.get("seconds") or {}).items():
            sums[r["impl"]][phase] += s
    print(path.rsplit("/", 1)[-1])
    for impl in sorted(sums, key=lambda i: -sum(sums[i].values())):
        print(f"  {impl:14} {cases[impl]:4} cases " + "  ".join(f"{p} {v:6.1f}" for p, v in sums[impl].items()))
PY
cat "$OUT/phase-seconds.txt"

# 4. Where a warm run's first case of a framework goes (rmsnorm's warm run on the H200: Numba's
#    first case 10.6 s, Triton's 3.0 s, the other cases 0.2-0.8 s): the first op's Numba and
#    Triton cases in fp32 in the harness's own process (isolate=false), warm, under cProfile:
#    the functions by cumulative and by own time.
# op_env OP: an op's caches as devtools/first-run laid them out, warm.
op_env() { python3 devtools/first-run env "$1" --cache "$HARNESS_CACHE"; }
#    FIRST_CASES_S=0 leaves it out.
FIRST_OP=${OPS%%,*}
if [ "${FIRST_CASES_S:-60}" != 0 ]; then
  step first-cases ${FIRST_CASES_S:-60} env $(op_env "$FIRST_OP") python3 -m cProfile -o /tmp/first-cases.prof \
    -m harness "op=$FIRST_OP" "impl=[numba,triton]" dtype=fp32 isolate=false tracking=none \
    hydra.run.dir=/tmp/runs/first-cases
  python3 -c "import pstats; pstats.Stats('/tmp/first-cases.prof').sort_stats('cumulative').print_stats(60); pstats.Stats('/tmp/first-cases.prof').sort_stats('tottime').print_stats(25)" \
    > "$OUT/first-cases.txt" 2>&1
fi

# 5. (EXHAUSTIVE_S=0 leaves it out.) Exhaustive beside fast at the large cases, in the warm run's cache (entries are kept per search).
LARGE=("op=rmsnorm" "impl=triton" "dtype=[fp32,bf16]" "shapes=[[32768,4096],[16384,8192],[8192,16384]]" tracking=none)
export $(op_env rmsnorm)
# It compares in rmsnorm's warm cache: left out where rmsnorm was not among the ops.
{ [ "${EXHAUSTIVE_S:-75}" = 0 ] || [[ ",$OPS," != *",rmsnorm,"* ]]; } && { echo "exit status $status" | tee -a "$OUT/steps.log"; exit $status; }
step exhaustive ${EXHAUSTIVE_S:-75} python3 -m harness "${LARGE[@]}" tuning_search=exhaustive hydra.run.dir=/tmp/runs/exhaustive
step fast 25 python3 -m harness "${LARGE[@]}" tuning_search=fast hydra.run.dir=/tmp/runs/fast
for run in exhaustive fast; do
  [ -f "/tmp/runs/$run/results.jsonl" ] && cp "/tmp/runs/$run/results.jsonl" "$OUT/large-$run.jsonl"
done
python3 - "$OUT/large-exhaustive.jsonl" "$OUT/large-fast.jsonl" > "$OUT/fast-vs-exhaustive.txt" 2>&1 <<'PY'
import json, sys
def load(path):
    try:
        return {(r["dtype"], tuple(r["shape"])): r for r in map(json.loads, open(path))}
    except OSError:
        return {}
ex, fa = load(sys.argv[1]), load(sys.argv[2])
print("dtype     shape         exhaustive_us  fast_us   fast/exh  same_config  tuning_s(exh, fast)")
for key in sorted(set(ex) & set(fa)):
    a, b = ex[key], fa[key]
    if a.get("median_us") and b.get("median_us"):
        same = {k: v for k, v in a["impl_config"].items() if k != "tuned_for_rows"} == \
               {k: v for k, v in b["impl_config"].items() if k != "tuned_for_rows"}
        print(f"{key[0]:9} {'x'.join(map(str, key[1])):13} {a['median_us']:12.2f} {b['median_us']:9.2f} "
              f"{b['median_us'] / a['median_us']:9.4f}  {str(same):11}  "
              f"({(a.get('tuning') or {}).get('seconds')}, {(b.get('tuning') or {}).get('seconds')})")
print(f"cases: exhaustive {len(ex)}, fast {len(fa)}")
PY
cat "$OUT/fast-vs-exhaustive.txt"
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
