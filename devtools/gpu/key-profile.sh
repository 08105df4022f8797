#!/usr/bin/env bash
# Where one Triton tuning key's seconds go (issue 32): a key alone in the harness's process
# (isolate=false), nothing cached, then under cProfile with the binaries cached and the tuning
# measured afresh, at 4096 and 781 columns (fp32 rmsnorm). Prints each key's split (building,
# binding, timing, digesting) and the profile's top functions by cumulative and own time.
source "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,uuid --format=csv | tee "$OUT/gpu.txt"
export PYTHONUNBUFFERED=1
ONE=(op=rmsnorm impl=triton dtype=fp32 isolate=false tracking=none sweep=smoke)
harness plain-4096 60 "${ONE[@]}" "shapes=[[4096,4096]]"
step prof-4096 60 python3 -m cProfile -o "$OUT/prof-4096.prof" -m harness "${ONE[@]}" "shapes=[[4096,4096]]" tuning=fresh \
  hydra.run.dir=/tmp/runs/prof-4096
step prof-781 60 python3 -m cProfile -o "$OUT/prof-781.prof" -m harness "${ONE[@]}" "shapes=[[1823,781]]" \
  hydra.run.dir=/tmp/runs/prof-781
harness threads-8192 60 "${ONE[@]}" "shapes=[[8192,8192]]" triton_compile=threads
for f in "$OUT"/*.jsonl /tmp/runs/prof-*/results.jsonl; do
  python3 - "$f" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line); t = r.get("tuning") or {}
    if t.get("source") == "measured":
        n = sum(1 for c in t.get("candidates", []) for p in ("us", "mid_us", "small_us") if c.get(p) is not None)
        print(sys.argv[1].split("/")[-1], r["shape"], len(t.get("candidates", [])), "candidates", n, "measures",
              {k: v for k, v in t.items() if k.startswith("seconds")}, "batch:", (t.get("batch") or {}).get("seconds"))
PY
done | tee "$OUT/keys.txt"
for p in "$OUT"/prof-*.prof; do
  python3 -c "import pstats,sys; s=pstats.Stats(sys.argv[1]); s.sort_stats('cumulative').print_stats(45); s.sort_stats('tottime').print_stats(25)" "$p" > "${p%.prof}.txt" 2>&1
done
head -c 6000 "$OUT/prof-4096.txt"
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
