#!/usr/bin/env bash
# The CuPy impls on a bare H200 host, within 6 minutes, from the repository's root:
#   1. compile seconds: every raw kernel module a bf16 or fp32 run may ask for, and every
#      idiomatic kernel (bound at a small shape), in a process with CuPy's kernel cache empty
#      (cold), then in a second process that finds it on disk (warm);
#   2. the GPU tests of the CuPy impls (tests/test_gpu.py -k cupy: every impl at full size
#      through the harness's checks, determinism, batch invariance, the stream and bind checks);
#   3. the harness on every op at its large size, impl=[cupy,triton,cuda], bf16 and fp32,
#      1-D ops then row ops, each stopped (records kept) at the script's deadline.
# Writes under $OUT: log, compile.txt, gpu-tests.txt, cupy-1d.jsonl, cupy-rows.jsonl (and their
# table.txt), tuning.json. Exit status: the worst of the steps'.
#   OUT=/tmp/out devtools/gpu/cupy.sh
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

# The CUDA C++ comparison needs its extension built: build it now, beside steps 1 and 2.
python3 -m impls._frameworks.cuda.build > "$OUT/cuda-build.log" 2>&1 &
cuda_build=$!

echo "== 1. compile seconds (cold: empty CuPy kernel cache; warm: a new process, the cache on disk)"
rm -rf "$CUPY_CACHE_DIR"
for when in cold warm; do
  timeout 120 python3 - "$when" <<'PY' | tee -a "$OUT/compile.txt"
import sys, time
import torch
from harness import registry
from impls._frameworks.cupy import kernels, rows
from impls._frameworks.cupy.launch import ELEMENTWISE

started = time.perf_counter()
for dtype in (torch.bfloat16, torch.float32):
    t = kernels.TYPES[dtype]
    for op in ELEMENTWISE.values():
        kernels.function("elementwise.cuh", f"elementwise<{t}, {op}>")
    for is_max in ("false", "true"):
        for atomic in ("false", "true"):
            kernels.function("reduce_1d.cuh", f"reduce_1d<{t}, {is_max}, {atomic}>")
        kernels.function("reduce_1d.cuh", f"reduce_partials<{is_max}>")
    for kernel, extras in (("rmsnorm_rows", [""]), ("rmsnorm_silu_mul_add_rows", [""]),
                           ("softmax_rows", ["false", "true"]), ("layernorm_rows", ["false", "true"])):
        for extra in extras:
            kernels.functions("rows.cuh", list(rows.expressions(kernel, dtype, (0, *rows.KEPT), extra).values()))
torch.cuda.synchronize()
raw = time.perf_counter() - started
started = time.perf_counter()
specs = registry.ops()
for name, op in specs.items():
    registry.load_impls(name, ["cupy"])
    spec = op()
    for dtype in (torch.bfloat16, torch.float32):
        inputs = spec.inputs((4096,) if spec.ndim == 1 else (4, 4096), dtype, "cuda", seed=1)
        for (o, impl, variant), i in registry.registered().items():
            if o == name and impl == "cupy" and variant in ("idiomatic", "naive"):
                i.bind(**inputs, out=spec.make_output(inputs))
torch.cuda.synchronize()
print(f"{sys.argv[1]}: raw kernel modules (bf16, fp32) {raw:.1f} s; idiomatic kernels bound {time.perf_counter() - started:.1f} s")
PY
  keep "${PIPESTATUS[0]}"
done

echo "== 2. GPU tests -k cupy ($(left) s left)"
timeout "$(( $(left) > 300 ? 150 : $(left) / 2 ))" python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k cupy 2>&1 \
  | tee "$OUT/gpu-tests.txt"
keep "${PIPESTATUS[0]}"

wait "$cuda_build" || echo "the CUDA build failed: its cases are skipped with the reason (cuda-build.log)"

sweep() {   # NAME SECONDS harness-args...
  local name=$1 seconds=$2; shift 2
  [ "$seconds" -gt 10 ] || { echo "sweep $name: no time left"; keep 124; return; }
  rm -rf "/tmp/runs/$name"
  timeout --signal=INT --kill-after=15 "$seconds" python3 -m harness "$@" impl=[cupy,triton,cuda] dtype=[bf16,fp32] \
    sweep=smoke tracking=none "hydra.run.dir=/tmp/runs/$name"
  local code=$?
  keep "$code"
  echo "sweep $name: exit $code"
  cp "/tmp/runs/$name/results.jsonl" "$OUT/$name.jsonl" 2>/dev/null
  cp "/tmp/runs/$name/table.txt" "$OUT/$name-table.txt" 2>/dev/null
}
echo "== 3. the harness at the large sizes ($(left) s left)"
sweep cupy-1d $(( $(left) * 2 / 5 )) "op=[copy,scale,sum,max]" "shapes=[[268435456]]"
sweep cupy-rows $(( $(left) - 10 )) "op=[rmsnorm,softmax,layernorm,rmsnorm_silu_mul_add]" "shapes=[[32768,4096]]"
echo "cupy.sh: $(( $(date +%s) - began )) s, exit $worst"
exit "$worst"
