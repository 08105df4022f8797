#!/usr/bin/env bash
# What slows a first run (issue 32): one Triton key (fp32 rmsnorm, 4096 columns) tuned with
# nothing cached, alone and after the other frameworks' cases at the same shape (each in
# the default case process), with the tuner's tally of samples; then Liger's import and first
# call, and torch.compile's first case, timed on their own.
source "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,uuid --format=csv | tee "$OUT/gpu.txt"
export PYTHONUNBUFFERED=1
ONE=(op=rmsnorm dtype=fp32 "shapes=[[4096,4096]]" sweep=smoke)
HARNESS_CACHE=/tmp/hc-alone harness alone 60 "${ONE[@]}" impl=triton
HARNESS_CACHE=/tmp/hc-after harness after 120 "${ONE[@]}" "impl=[cupy,numba,torch_compile,liger,eager,triton]"
HARNESS_CACHE=/tmp/hc-alone harness alone-again 60 "${ONE[@]}" impl=triton tuning=fresh
step liger-import 60 python3 -X importtime -c "import liger_kernel.ops.rms_norm"
sort -t'|' -k2 -n -r "$OUT/liger-import.log" | head -15
step liger-first 60 python3 - <<'PY'
import time, torch
t = time.perf_counter()
from liger_kernel.ops.rms_norm import rms_norm_forward
print(f"import {time.perf_counter() - t:.2f} s")
x = torch.randn(4096, 4096, device="cuda"); w = torch.ones(4096, device="cuda")
for i in range(3):
    t = time.perf_counter(); rms_norm_forward(x, w, 1e-6, 0.0, "llama", None); torch.cuda.synchronize()
    print(f"call {i}: {time.perf_counter() - t:.3f} s")
x = x.bfloat16(); w = w.bfloat16()
t = time.perf_counter(); rms_norm_forward(x, w, 1e-6, 0.0, "llama", None); torch.cuda.synchronize()
print(f"bf16 first call: {time.perf_counter() - t:.3f} s")
PY
for f in "$OUT"/*.jsonl; do
  python3 - "$f" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line); t = r.get("tuning") or {}
    if t.get("source") == "measured" and "seconds_timing" in t:
        print(sys.argv[1].split("/")[-1], r["impl"], r["variant"], r["shape"], len(t.get("candidates", [])), "candidates",
              {k: v for k, v in t.items() if k.startswith("seconds")}, t.get("timing_tally"))
PY
done | tee "$OUT/keys.txt"
grep -h "^\[" "$OUT"/after.log | head -20
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
