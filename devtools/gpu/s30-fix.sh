#!/usr/bin/env bash
# Branch s30-fix on the H200, from the repository root on a bare GPU host with
# PYTHONPATH=/tmp/site:$PWD, within ~6 minutes (limits add to 390 s); everything comes back in $OUT/out-s30-fix.tgz:
# 1. the CUDA build (~50 s cold);
# 2. the longest CUDA row (devtools/gpu/long-row.py: 2^31 - 16 elements and one fewer, bf16 and
#    fp32, every trip, against float64; 2^31 - 15 refused);
# 3. the Numba row ops at 32768x4096 bf16/fp32 through the tuner (each candidate config goes
#    through rows.check: a refusal of a tuned config shows as an error record).
# The Numba kernels' SASS is unchanged (devtools/numba-sass on a CPU): numba-rows16.sh covers
# their bits and the keeps on the GPU as for s30-gpu.
source "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,uuid --format=csv | tee "$OUT/gpu.txt"
git log --oneline -1 | tee "$OUT/version.txt"
export PYTHONUNBUFFERED=1
step cuda-build 120 python3 -m impls._frameworks.cuda.build
step long-row 120 python3 devtools/gpu/long-row.py
harness numba-rows 150 "op=[rmsnorm,softmax,layernorm,rmsnorm_silu_mul_add]" impl=numba "dtype=[bf16,fp32]" \
  "shapes=[[32768,4096]]"
python3 - "$OUT/numba-rows.jsonl" <<'PY' 2>&1 | tee "$OUT/numba-rows.txt"
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(r.get("op"), r.get("variant"), r.get("dtype"), r.get("status"), r.get("pct_roof"), (r.get("reason") or "")[:200])
PY
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
