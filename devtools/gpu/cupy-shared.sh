#!/usr/bin/env bash
# CuPy's raw variants, now the CUDA extension's kernels compiled by NVRTC, on a bare H200 host,
# within 6 minutes, from the repository's root:
#   1. NVRTC through CuPy: one kernel of each op compiled from kernels.source (cold: CuPy's cache
#      empty), so that a missing header or a bad name expression shows first, with its seconds;
#   2. the GPU tests of the CuPy impls (tests/test_gpu.py -k cupy: every impl at full size through
#      the harness's checks, determinism, batch invariance; the raw row kernels in every config on
#      rows at odd offsets; the 1-D ones at odd offsets and sizes; views and streams);
#   3. the harness at the large sizes, impl=[cupy,cuda] side by side, bf16 and fp32: the 1-D ops
#      at 2^28 elements, then the row ops at 32768x4096, each stopped (records kept) at the deadline.
# Writes under $OUT: log, compile.txt, gpu-tests.txt, cupy-1d.jsonl, cupy-rows.jsonl (and their
# table.txt), tuning.json. Exit status: the worst of the steps'.
#   OUT=/tmp/out devtools/gpu/cupy-shared.sh
set -uo pipefail
: "${OUT:?set OUT to the folder whose files come back}"
export PYTHONUNBUFFERED=1 HARNESS_CACHE=/tmp/hc CUPY_CACHE_DIR=/tmp/cupy-kernel-cache
export PYTHONPATH="${PYTHONPATH:-$PWD}"
mkdir -p "$OUT" "$HARNESS_CACHE"
exec > >(tee -a "$OUT/log") 2>&1
trap 'cp "$HARNESS_CACHE/tuning.json" "$HARNESS_CACHE/roofs.json" "$OUT/" 2>/dev/null' EXIT
began=$(date +%s)
deadline=$((began + ${CUPY_SH_SECONDS:-345}))
left() { echo $((deadline - $(date +%s))); }
worst=0
keep() { [ "$1" -gt "$worst" ] && worst=$1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
python3 -c 'import torch, cupy; print("torch", torch.__version__, "cupy", cupy.__version__, "gpu", torch.cuda.get_device_name())'

# The CUDA side of the comparison needs its extension built: build it now, beside steps 1 and 2.
python3 -m impls._frameworks.cuda.build > "$OUT/cuda-build.log" 2>&1 &
cuda_build=$!

echo "== 1. NVRTC through CuPy, one kernel of each op (cold)"
rm -rf "$CUPY_CACHE_DIR"
timeout 120 python3 - <<'PY' 2>&1 | tee "$OUT/compile.txt"
import time
from impls._frameworks.cupy import kernels
first = {"copy": "hk::elementwise_vector<__nv_bfloat16, hk::ELEMENTWISE_UNROLL, hk::Identity>",
         "scale": "hk::elementwise_scalar<float, hk::ELEMENTWISE_UNROLL, hk::Times>",
         "sum": "hk::reduce_atomic<__nv_bfloat16, hk::Add, hk::AtomicAdd>",
         "max": "hk::reduce_partials<float, hk::MaxNan>",
         "rmsnorm": "hk::rmsnorm_rows<__nv_bfloat16, 4, 0, true>",
         "softmax": "hk::softmax_rows<float, 0, 4, hk::ONLINE, false>",
         "layernorm": "hk::layernorm_rows<__half, 8, 0, hk::WELFORD, true>",
         "rmsnorm_silu_mul_add": "hk::chain_rows<__nv_bfloat16, 2, 0, false>"}
print(kernels.settings())
for op, name in first.items():
    started = time.perf_counter()
    kernels.functions(op, [name])
    print(f"{op}: {name} compiled in {time.perf_counter() - started:.1f} s")
PY
keep "${PIPESTATUS[0]}"

echo "== 2. GPU tests -k cupy ($(left) s left)"
timeout "$(( $(left) > 300 ? 170 : $(left) / 2 ))" python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k cupy \
  2>&1 | tee "$OUT/gpu-tests.txt"
keep "${PIPESTATUS[0]}"

wait "$cuda_build" || echo "the CUDA build failed: its cases are skipped with the reason (cuda-build.log)"

sweep() {   # NAME SECONDS harness-args...
  local name=$1 seconds=$2; shift 2
  [ "$seconds" -gt 10 ] || { echo "sweep $name: no time left"; keep 124; return; }
  rm -rf "/tmp/runs/$name"
  timeout --signal=INT --kill-after=15 "$seconds" python3 -m harness "$@" impl=[cupy,cuda] dtype=[bf16,fp32] \
    sweep=smoke tracking=none "hydra.run.dir=/tmp/runs/$name"
  local code=$?
  keep "$code"
  echo "sweep $name: exit $code"
  cp "/tmp/runs/$name/results.jsonl" "$OUT/$name.jsonl" 2>/dev/null
  cp "/tmp/runs/$name/table.txt" "$OUT/$name-table.txt" 2>/dev/null
}
echo "== 3. the harness at the large sizes, cupy beside cuda ($(left) s left)"
sweep cupy-rows $(( $(left) * 3 / 5 )) "op=[rmsnorm,softmax,layernorm,rmsnorm_silu_mul_add]" "shapes=[[32768,4096]]"
sweep cupy-1d $(( $(left) - 10 )) "op=[copy,scale,sum,max]" "shapes=[[268435456]]"
echo "cupy-shared.sh: $(( $(date +%s) - began )) s, exit $worst"
exit "$worst"
