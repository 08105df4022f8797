#!/usr/bin/env bash
# The honesty audit's checks on the H200 (branch s32-honesty), from the repository root on a bare
# GPU host with PYTHONPATH=/tmp/site:$PWD, within ~9 minutes (limits add to 540 s); everything
# comes back in $OUT/out-honesty-gpu.tgz (devtools/gpu/steps.sh packs it):
# 1. the CUDA build (~50 s cold), so that the suites below time binds, not nvcc;
# 2. the planted-fault suite as it stands (tests.plugins.broken and .faults, RMSNorm bf16
#    32768x4096, every honest RMSNorm impl): 15 of 15 caught, none honest flagged, under the new
#    checks (the guards, the payload poison, the unpoisoned refill, the returned-result rules);
# 3. the cheats (tests.plugins.cheats) at an odd size, bf16 4095x4097 (copy and sum take its
#    16,777,215 elements), beside every honest impl of copy, rmsnorm, softmax and sum, in two
#    halves by framework: each cheat caught as on the CPU (background_thread by the stream
#    check here), no honest impl flagged;
# 4. the smoke sweep of every op and impl: no case invalid (the negative controls fail).
# Read: faults.log, cheats-*.log (the suite's table; exit 0 = all caught, none flagged),
# smoke-summary.log (statuses; any invalid case with its reason).
source "$(dirname "$0")/gpu/steps.sh"
nvidia-smi --query-gpu=name,uuid,clocks.max.memory --format=csv | tee "$OUT/gpu.txt"
git log --oneline -1 | tee "$OUT/version.txt"
export PYTHONUNBUFFERED=1
step cuda-build 90 python3 -m impls._frameworks.cuda.build
step faults 170 python3 -m harness.faultsuite --device cuda --json "$OUT/faults.json"
step cheats-a 110 python3 -m harness.faultsuite --device cuda --plugins tests.plugins.cheats \
  --shape 4095x4097 --dtype bfloat16 --honest eager,triton,cuda --json "$OUT/cheats-a.json"
step cheats-b 110 python3 -m harness.faultsuite --device cuda --plugins tests.plugins.cheats \
  --shape 4095x4097 --dtype bfloat16 --honest cupy,numba,torch_compile,liger,quack --json "$OUT/cheats-b.json"
harness smoke 55 op=all impl=all sweep=smoke
step smoke-summary 5 python3 - "$OUT/smoke.jsonl" <<'EOF'
import collections, json, sys
recs = [json.loads(line) for line in open(sys.argv[1])]
print(collections.Counter(r["status"] for r in recs))
for r in recs:
    if r["status"] == "invalid":
        print(r["op"], r["impl"], r["variant"], r["dtype"], r["shape"], "|", r["reason"][:400])
EOF
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
