#!/usr/bin/env bash
# Triton's tuning keys with their candidates built in the run's pool of processes
# (triton_compile=processes, the default) against the same keys built in the case's own
# process (triton_compile=threads: how Triton built them before the pool), on the H200
# (issue 32: a key in 3 s or less). From the repository root on a bare GPU host with
# PYTHONPATH=/tmp/site:$PWD; everything lands under $OUT, in about 5 minutes at most.
#
# Each run starts with an empty Triton cache (TRITON_CACHE_DIR) and an empty HARNESS_CACHE but
# for the roof (measured once, first, and copied in: it is no part of a key's tuning). The
# shapes are one per row length (781, 4096, 8192, 16384) at 2048 rows, a tuning problem's
# batch, which takes its tuned config without a batch measurement of its own: every key of
# the default sweep is tuned, and the cases beside it take seconds. LayerNorm: `welford` only,
# to fit the call.
#
# What it prints ($OUT/summary.txt): each key's seconds and the seconds building its
# candidates, threads beside processes; per run, the Triton compiles of the case's process
# (cache misses: binaries the pool did not build) and of the pool, and the cache hits (the
# pool's binaries found by the launch: same cache key); the candidates the pool could not
# build; the GPU memory nvidia-smi saw per process of the pool.
source "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv | tee "$OUT/gpu.txt"
nproc | tee -a "$OUT/gpu.txt"
SHAPES='shapes=[[2048,781],[2048,4096],[2048,8192],[2048,16384]]'

# The roof, once, into a cache of its own that each run starts from.
export HARNESS_CACHE=/tmp/hc/roof TRITON_CACHE_DIR=/tmp/tc/roof
rm -rf /tmp/hc /tmp/tc /tmp/runs
step roof 40 python3 -m harness op=copy impl=eager dtype=fp32 'shapes=[[1024]]' tracking=none \
  hydra.run.dir=/tmp/runs/roof

run() {   # run NAME LIMIT_S MODE OVERRIDES...
  local name=$1 limit=$2 mode=$3; shift 3
  mkdir -p "/tmp/hc/$name"
  cp /tmp/hc/roof/roofs.json "/tmp/hc/$name/" 2>/dev/null
  export HARNESS_CACHE="/tmp/hc/$name" TRITON_CACHE_DIR="/tmp/tc/$name" HARNESS_TRITON_COMPILE_LOG="$OUT/compiles-$name.jsonl"
  # GPU memory per process, every second, while it runs (the pool's processes among them)
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -lms 1000 > "$OUT/apps-$name.csv" 2>&1 &
  local smi=$!
  step "$name" "$limit" python3 -m harness impl=triton "$SHAPES" tracking=none triton_compile="$mode" \
    hydra.run.dir="/tmp/runs/$name" "$@"
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  unset HARNESS_TRITON_COMPILE_LOG
  cp "/tmp/runs/$name/results.jsonl" "$OUT/results-$name.jsonl" 2>/dev/null
}

run rmsnorm-processes 55 processes op=rmsnorm
run rmsnorm-threads 75 threads op=rmsnorm
run layernorm-processes 55 processes op=layernorm variant=welford
run layernorm-threads 75 threads op=layernorm variant=welford

python3 - "$OUT" > "$OUT/summary.txt" 2>&1 <<'PY'
import json, sys
from collections import Counter, defaultdict
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader
from pathlib import Path

out = Path(sys.argv[1])
loader = SourceFileLoader("first_run", "devtools/first-run")
first_run = module_from_spec(spec_from_loader("first_run", loader))
loader.exec_module(first_run)

def lines(path):
    try:
        return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
    except (OSError, ValueError):
        return []

for op in ("rmsnorm", "layernorm"):
    keys = defaultdict(dict)
    for mode in ("threads", "processes"):
        records = first_run._records(out / f"results-{op}-{mode}.jsonl")
        statuses = Counter(r["status"] for r in records)
        print(f"{op} {mode}: {len(records)} records {dict(statuses)}")
        for k in first_run.tuning_keys(records):
            cols = (k["problems"] or {}).get("us", "?").split("x")[-1]
            keys[(k["variant"], k["dtype"], int(cols) if cols.isdigit() else cols)][mode] = k
        failed = {}   # the candidates the pool could not build, each named (once per key)
        for r in records:
            for f in ((r.get("tuning") or {}).get("build") or {}).get("failed", []):
                failed[(r["variant"], r["dtype"], r["shape"][-1], f["candidate"])] = f"{f['kind']}: {f['error'][-200:]}"
        for (variant, dtype, cols, candidate), error in failed.items():
            print(f"  build failed: {variant} {dtype} {cols} columns: {candidate}: {error}")
        log = lines(out / f"compiles-{op}-{mode}.jsonl")
        by = Counter((l["role"], "hit" if l["cache_hit"] else "compiled") for l in log)
        print(f"  Triton compiles: case process {by[('case', 'compiled')]} compiled, {by[('case', 'hit')]} found in "
              f"the cache; pool {by[('pool', 'compiled')]} compiled ({len({l['pid'] for l in log if l['role'] == 'pool'})} "
              f"processes)")
        here = Counter(l["kernel"] for l in log if l["role"] == "case" and not l["cache_hit"])
        if mode == "processes" and here:
            print(f"  compiled in the case process, by kernel: {dict(here)}")
        pool_pids = {l["pid"] for l in log if l["role"] == "pool"}
        mem = defaultdict(int)
        for row in (out / f"apps-{op}-{mode}.csv").read_text().splitlines() if (out / f"apps-{op}-{mode}.csv").exists() else []:
            parts = [p.strip() for p in row.split(",")]
            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                mem[int(parts[0])] = max(mem[int(parts[0])], int(parts[1]))
        print(f"  GPU memory (MiB, max seen): pool processes {sorted(mem[p] for p in pool_pids if p in mem) or 'none seen'}; "
              f"others {sorted(v for p, v in mem.items() if p not in pool_pids)}")
    print(f"\n{op}: seconds per key (building them), threads -> processes")
    print(f"{'variant':8} {'dtype':9} {'cols':>6} {'threads':>16} {'processes':>16}")
    for key in sorted(keys, key=str):
        cells = []
        for mode in ("threads", "processes"):
            k = keys[key].get(mode)
            cells.append(f"{k['seconds']:6.2f} ({k.get('seconds_building') or 0:5.2f})" if k else f"{'-':>14}")
        print(f"{key[0]:8} {key[1]:9} {key[2]:>6} {cells[0]:>16} {cells[1]:>16}")
    print()
PY
cat "$OUT/summary.txt"
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
