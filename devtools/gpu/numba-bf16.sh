#!/usr/bin/env bash
# The Numba row kernels with 16-byte chunks (issue 35: one LDG.128/STG.128 a chunk, four chunks
# a step, the row cache by 32-bit shared offsets, softmax's exp by ex2), on the H200, from the
# repository root on a bare GPU host with PYTHONPATH=/tmp/site:$PWD: the harness at 32768x4096
# and 16384x8192 for the four row ops, bf16 and fp32, Numba then CUDA (the same roof, cached
# in $HARNESS_CACHE); every Numba GPU test; every Numba kernel compiled and loaded on the GPU;
# then each Numba case's % of roof, chosen config and every tuned candidate's registers and
# time; Nsight Compute's speed of light for the bf16 kernels. Everything it writes is under
# $OUT. Under 6 minutes: each step's limit is cut to what is left of BUDGET_S, in the order of
# what matters most (Numba's numbers, its tests, the compile check, CUDA beside it, ncu).
source "$(dirname "$0")/steps.sh"
BUDGET_S=${BUDGET_S:-345}
left() { local want=$1 rest=$((BUDGET_S - SECONDS)); echo $(( rest < want ? (rest > 5 ? rest : 5) : want )); }

python3 -c "import numba, numba_cuda, numpy; print('numba', numba.__version__, 'numba-cuda', numba_cuda.__version__, 'numpy', numpy.__version__)" | tee "$OUT/versions.txt"
git log --oneline -1 | tee -a "$OUT/versions.txt"

ROWS="op=[rmsnorm,softmax,layernorm,rmsnorm_silu_mul_add]"
SHAPES="shapes=${ROWS_SHAPES:-[[32768,4096],[16384,8192]]}"

# 1. Numba at the two large row shapes (tuning included), bf16 and fp32.
harness numba-rows "$(left 150)" "$ROWS" impl=numba "dtype=[bf16,fp32]" "$SHAPES"

# 2. Every Numba GPU test (full-size checks, determinism, batch invariance, the launcher's
#    contract, odd sizes on misaligned views: the kernels for any rows, the stream, the disk cache).
step numba-tests "$(left 150)" python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k numba --durations=10

# 3. Every Numba kernel (both row kinds of each row op, every storage type) compiled and loaded.
step numba-compile "$(left 90)" python3 tests/numba_compile.py --gpu

# 4. CUDA at the same shapes, for the ratio (its extension built here if this host has none).
harness cuda-rows "$(left 120)" "$ROWS" impl=cuda "dtype=[bf16,fp32]" "$SHAPES"

# 5. Nsight Compute's speed of light for the Numba bf16 kernels at 32768x4096 (the config the
#    tuner chose above, from $HARNESS_CACHE): SM against DRAM throughput, instructions issued,
#    registers and occupancy; is each kernel bound by its instructions or by memory?
cat > /tmp/numba_ncu.py <<'PY'
import torch
from harness import registry
fw = registry.frameworks()["numba"]
fw.prepare(torch.device("cuda:0"))
for op_name, variant in (("rmsnorm", registry.NO_VARIANT), ("softmax", "on_chip"), ("softmax", "three_pass"),
                         ("layernorm", "two_pass"), ("rmsnorm_silu_mul_add", "fused")):
    op = registry.ops()[op_name]()
    registry.load_impls(op_name, ["numba"])
    inputs = op.inputs((32768, 4096), torch.bfloat16, torch.device("cuda:0"), seed=1)
    out = op.make_output(inputs)
    launch = registry.registered()[(op_name, "numba", variant)].bind(**inputs, out=out)
    print(op_name, variant, getattr(launch, "config", None), flush=True)
    launch()                                  # binding tuned (or read the tuner's table) already
    with torch.cuda.nvtx.range("profile"):    # ncu profiles only the launches in this range
        launch()
    torch.cuda.synchronize()
PY
if command -v ncu > /dev/null; then
  step numba-ncu "$(left 90)" ncu --nvtx --nvtx-include "profile/" \
    --section SpeedOfLight --section LaunchStats --section Occupancy --metrics smsp__inst_executed.sum \
    --csv --page details python3 /tmp/numba_ncu.py
fi

# 6. Per case: % of roof, the chosen config, and every tuned Numba candidate's registers and times.
python3 - "$OUT" > "$OUT/rows-summary.txt" 2>&1 <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for name in ("numba-rows", "cuda-rows"):
    path = out / f"{name}.jsonl"
    if not path.exists():
        print(f"{name}: no results")
        continue
    for line in path.read_text().splitlines():
        r = json.loads(line)
        cfg = {k: v for k, v in (r.get("impl_config") or {}).items()
               if k in ("group", "threads", "cached", "kept", "chunk", "whole", "packs")}
        pct = r.get("pct_roof")
        print(f"{r.get('op'):22s} {r.get('impl'):6s} {str(r.get('variant')):10s} {r.get('dtype'):9s} "
              f"{str(r.get('shape')):14s} {r.get('status'):5s} {pct if pct is None else round(pct, 1)}% {cfg}")
        if r.get("impl") == "numba":
            for c in (r.get("tuning") or {}).get("candidates", []):
                print("      ", {k: c.get(k) for k in ("group", "threads", "cached", "kept", "regs", "us")})
PY
grep -v "^ " "$OUT/rows-summary.txt" | head -60
echo "exit status $status after $SECONDS s" | tee -a "$OUT/steps.log"
exit $status
