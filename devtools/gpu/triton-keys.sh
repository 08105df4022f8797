#!/usr/bin/env bash
# Triton's tuning keys with the row kernels' row and program counts unspecialised
# (rows.BATCH_ARGS: one binary per config for every batch) and the compile pool started
# lazily (issue 32: a key in 3 s or less), on the H200, from the repository root on a bare GPU
# host with PYTHONPATH=/tmp/site:$PWD; everything comes back in $OUT/out-triton-keys.tgz, within 4 minutes.
#
# 1. RMSNorm and LayerNorm (welford) at 1823x781, 32768x4096 and 16384x8192 in bf16 and fp32,
#    each with an empty tuning cache and Triton cache (the roof measured once, first, and
#    copied in), candidates built in the pool (triton_compile=processes, the default); the 781
#    keys again with triton_compile=threads (built in the case's own process).
# 2. RMSNorm again with its caches warm: no key tuned, and no pool process started (the
#    largest count of processes spawned by multiprocessing seen while it runs: the case's
#    worker alone, against the worker and the pool in the cold run).
# 3. triton-keys-ab.py: at each large case, the chosen config unspecialised beside the same
#    kernel specialised as Triton does by default, timed side by side (no-loss rule: within
#    1%), and the bits both write (equal); then the bits of the multi-row tiles.
# What it prints ($OUT/summary.txt): each key's seconds and seconds building (binding, timing
# where the tuner reports them), its Triton compiles, and the large cases' medians beside
# docs/results/h200.jsonl's.
source "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv | tee "$OUT/gpu.txt"
nproc | tee -a "$OUT/gpu.txt"
SHAPES='shapes=[[1823,781],[32768,4096],[16384,8192]]'

export HARNESS_CACHE=/tmp/hc/roof TRITON_CACHE_DIR=/tmp/tc/roof
rm -rf /tmp/hc /tmp/tc /tmp/runs
step roof 25 python3 -m harness op=copy impl=eager dtype=fp32 'shapes=[[1024]]' tracking=none \
  hydra.run.dir=/tmp/runs/roof

run() {   # run NAME LIMIT_S MODE CACHE OVERRIDES...: CACHE names the tuning and Triton caches (empty if new)
  local name=$1 limit=$2 mode=$3 cache=$4; shift 4
  mkdir -p "/tmp/hc/$cache"
  cp -n /tmp/hc/roof/roofs.json "/tmp/hc/$cache/" 2>/dev/null
  export HARNESS_CACHE="/tmp/hc/$cache" TRITON_CACHE_DIR="/tmp/tc/$cache" HARNESS_TRITON_COMPILE_LOG="$OUT/compiles-$name.jsonl"
  # processes started by multiprocessing's spawn (the case's worker, the pool's), twice a second
  (while sleep 0.5; do pgrep -fc spawn_main; done) > "$OUT/spawned-$name.txt" 2>/dev/null &
  local watch=$!
  step "$name" "$limit" python3 -m harness impl=triton dtype=[bf16,fp32] tracking=none triton_compile="$mode" \
    hydra.run.dir="/tmp/runs/$name" "$@"
  kill $watch 2>/dev/null; wait $watch 2>/dev/null
  unset HARNESS_TRITON_COMPILE_LOG
  cp "/tmp/runs/$name/results.jsonl" "$OUT/results-$name.jsonl" 2>/dev/null
}

run rmsnorm-processes 55 processes rmsnorm op=rmsnorm "$SHAPES"
run layernorm-processes 55 processes layernorm op=layernorm variant=welford "$SHAPES"
run rmsnorm-threads 25 threads rmsnorm-threads op=rmsnorm 'shapes=[[1823,781]]'
run layernorm-threads 25 threads layernorm-threads op=layernorm variant=welford 'shapes=[[1823,781]]'
run rmsnorm-warm 20 processes rmsnorm op=rmsnorm "$SHAPES"
step ab 35 python3 devtools/gpu/triton-keys-ab.py "$OUT/results-rmsnorm-processes.jsonl" \
  "$OUT/results-layernorm-processes.jsonl"
cp "$OUT/ab.log" "$OUT/ab.jsonl"

python3 - "$OUT" > "$OUT/summary.txt" 2>&1 <<'PY'
import json, sys
from collections import Counter
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader
from pathlib import Path

out = Path(sys.argv[1])
loader = SourceFileLoader("first_run", "devtools/first-run")
first_run = module_from_spec(spec_from_loader("first_run", loader))
loader.exec_module(first_run)

def lines(path):
    try:
        return [json.loads(l) for l in path.read_text().splitlines() if l.strip().startswith("{")]
    except (OSError, ValueError):
        return []

for name in ("rmsnorm-processes", "rmsnorm-threads", "layernorm-processes", "layernorm-threads", "rmsnorm-warm"):
    records = first_run._records(out / f"results-{name}.jsonl")
    log = lines(out / f"compiles-{name}.jsonl")
    by = Counter((l["role"], "hit" if l["cache_hit"] else "compiled") for l in log)
    try:
        spawned = max(int(n) for n in (out / f"spawned-{name}.txt").read_text().split())
    except (OSError, ValueError):
        spawned = "?"
    print(f"{name}: {len(records)} records {dict(Counter(r['status'] for r in records))}; Triton compiles: case "
          f"process {by[('case', 'compiled')]} (+{by[('case', 'hit')]} found built), pool {by[('pool', 'compiled')]}; "
          f"most processes spawned at once: {spawned}")
    for k in first_run.tuning_keys(records):
        extra = ", ".join(f"{p.removeprefix('seconds_')} {k[p]}" for p in ("seconds_binding", "seconds_timing") if p in k)
        print(f"  {k['seconds']:6.2f} s (building {k.get('seconds_building')}{', ' + extra if extra else ''}) "
              f"{k['variant']} {k['dtype']} {k['problems']}")
    failed = {f["candidate"]: f["error"][-200:] for r in records
              for f in ((r.get("tuning") or {}).get("build") or {}).get("failed", [])}
    for candidate, error in failed.items():
        print(f"  build failed: {candidate}: {error}")

print("\nlarge cases: median us now (chosen config) / docs/results/h200.jsonl")
ref = {}
for r in lines(Path("docs/results/h200.jsonl")):
    if r.get("impl") == "triton" and r.get("median_us"):
        ref[(r["op"], r["variant"], r["dtype"], tuple(r["shape"]))] = r["median_us"]
for name in ("rmsnorm-processes", "layernorm-processes"):
    for r in first_run._records(out / f"results-{name}.jsonl"):
        key = (r["op"], r["variant"], r["dtype"], tuple(r["shape"]))
        if key[3] in ((32768, 4096), (16384, 8192)) and r.get("median_us"):
            before = ref.get(key)
            ratio = f"{r['median_us'] / before:.3f}" if before else "-"
            cfg = {k: v for k, v in (r.get("impl_config") or {}).items() if v not in (False, 0, "plain")}
            print(f"  {key[0]} {key[1]} {key[2]} {key[3][0]}x{key[3][1]}: {r['median_us']:.2f} / "
                  f"{before or float('nan'):.2f} = {ratio}  {r['status']} batch_invariant={r.get('batch_invariant')} {cfg}")

print("\nshipped (unspecialised) beside specialised, same config, one process:")
for l in lines(out / "ab.jsonl"):
    t = f" {l['shipped_us']} / {l['specialised_us']} us = {l['ratio']}" if "ratio" in l else ""
    print(f"  {l['op']} {l['variant']} {l['dtype']} {l['shape']} rows={l['config'].get('rows')} "
          f"warps={l['config'].get('num_warps')} same_bits={l['same_bits']}{t}")
PY
cat "$OUT/summary.txt"
tail -1 "$OUT/ab.log"
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
