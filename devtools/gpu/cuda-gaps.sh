#!/usr/bin/env bash
# Branch s28-cuda (issue 34: the CUDA impls within 3% of Triton at the large cases), on a bare
# H200 host from the repository root with PYTHONPATH=/tmp/site:$PWD, within 5 minutes (a ~30 s
# cold build, then steps of 90, 75, 40 and 55 s):
#   1. rmsnorm and layernorm, CUDA beside Triton, bf16/fp16/fp32: 32768x4096 first (the misses),
#      then 16384x8192 and 8192x16384. The CUDA row kernels' looped path changed (L2 hints, a
#      batched write) and its configs now reach one or two packs a thread: impl_config says
#      whether the tuner took a looped config (packs 0);
#   2. max and sum at 2^28, CUDA beside Triton, three dtypes (the 16-bit max now folds packs
#      with max.NaN.f16x2 / bf16x2);
#   3. the CUDA GPU tests of the changed kernels: every CUDA row op and the 1-D max at full
#      size (the looped write is shared by softmax and the chain too), the 1-D impls on views
#      at odd offsets, and every CUDA kernel in every config at odd sizes and offsets.
# Summary: $OUT/frameworks.md. Everything comes back packed in $OUT/out.tgz (steps.sh).
source "$(dirname "$0")/steps.sh"
nvidia-smi --query-gpu=name,uuid,clocks.max.memory --format=csv | tee "$OUT/gpu.txt"
git log --oneline -3 | tee "$OUT/versions.txt"
export PYTHONUNBUFFERED=1
python3 -m impls._frameworks.cuda.build > "$OUT/cuda-build.log" 2>&1
echo "cuda build exit $? ($(tail -1 "$OUT/cuda-build.log"))" | tee -a "$OUT/steps.log"
ROWS="op=[rmsnorm,layernorm]"
harness rows-32768 ${ROWS_A_S:-90} "$ROWS" "impl=[cuda,triton]" "dtype=[bf16,fp16,fp32]" "shapes=[[32768,4096]]"
harness rows-long ${ROWS_B_S:-75} "$ROWS" "impl=[cuda,triton]" "dtype=[bf16,fp16,fp32]" \
  "shapes=[[16384,8192],[8192,16384]]"
[ -n "${SOFTMAX_CHAIN_S:-}" ] && harness softmax-chain "$SOFTMAX_CHAIN_S" "op=[softmax,rmsnorm_silu_mul_add]" "impl=[cuda,triton]" \
  "dtype=[bf16,fp16,fp32]" "shapes=[[32768,4096],[16384,8192],[8192,16384]]"
harness reductions ${REDUCE_S:-40} "op=[max,sum]" "impl=[cuda,triton]" "dtype=[bf16,fp16,fp32]" "shapes=[[268435456]]"
step gpu-tests ${TESTS_S:-55} python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py --durations=10 -k \
  "(full_size and cuda and (rmsnorm or layernorm or max or softmax)) or (odd_offsets_and_odd_sizes and cuda and max) or test_the_cuda_kernels_are_right"
python3 scripts/summarize "$OUT"/*.jsonl --frameworks 32768x4096 > "$OUT/frameworks.md" 2>&1
python3 scripts/summarize "$OUT"/*.jsonl --frameworks 16384x8192,8192x16384,268435456 >> "$OUT/frameworks.md" 2>&1
# each case's best passing CUDA and Triton variant, % of roof, and their ratio (the issue's 0.97)
python3 - "$OUT"/*.jsonl >> "$OUT/frameworks.md" 2>&1 <<'PY'
import json, sys
best = {}
for path in sys.argv[1:]:
    for line in open(path):
        r = json.loads(line)
        if r.get("status") == "ok" and r.get("pct_roof") and r.get("impl") in ("cuda", "triton"):
            key = (r["op"], "x".join(map(str, r["shape"])), r["dtype"])
            old = best.setdefault(key, {}).get(r["impl"])
            if old is None or r["pct_roof"] > old[0]:
                best[key][r["impl"]] = (r["pct_roof"], r["variant"], r.get("impl_config") or {})
print("\n| op | shape | dtype | cuda (variant, config) | triton | cuda/triton |\n|---|---|---|---|---|---|")
for (op, shape, dtype), b in sorted(best.items()):
    c, t = b.get("cuda"), b.get("triton")
    conf = {k: v for k, v in (c[2] if c else {}).items() if k in ("group", "packs", "threads", "blocks")}
    print(f"| {op} | {shape} | {dtype} | {f'{c[0]:.1f} ({c[1]}, {conf})' if c else '-'} | "
          f"{f'{t[0]:.1f} ({t[1]})' if t else '-'} | {f'{c[0] / t[0]:.3f}' if c and t else '-'} |")
PY
cat "$OUT/frameworks.md"
echo "exit status $status" | tee -a "$OUT/steps.log"
exit $status
