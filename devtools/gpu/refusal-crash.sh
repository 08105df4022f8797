#!/usr/bin/env bash
# Why a refusal (TORCH_CHECK) of the CUDA extension segfaults on the GPU host: the toolchain, the
# built library's unwind sections, and probes that throw from tiny ops built by g++ and by nvcc,
# each in its own process with a SIGSEGV handler that names the library the fault is in.
cd "$(dirname "$0")/../.."
D=devtools/gpu/crash
export HARNESS_CACHE=${HARNESS_CACHE:-/tmp/hc}
{ gcc --version | head -1; g++ --version | head -1; nvcc --version | tail -2; ld --version | head -1
  python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch._C._GLIBCXX_USE_CXX11_ABI); print(torch.__config__.show())"
  which gdb; ldd --version | head -1; } 2>&1 | tee "$OUT/toolchain.txt"
gcc -shared -fPIC -O1 -o /tmp/segv.so $D/segv.c -ldl
( timeout 120 python3 -m impls._frameworks.cuda.build > "$OUT/build.txt" 2>&1 ) &
for m in cpp-torchcheck cu-torchcheck cu-std cpp-std; do   # built (and called once, unhandled) in parallel
  ( timeout 120 python3 $D/probe.py $m > "$OUT/build-$m.txt" 2>&1 ) &
done
wait
lib=$(ls "$HARNESS_CACHE"/cuda/*/*.so 2>/dev/null | head -1); echo "library: $lib" | tee -a "$OUT/toolchain.txt"
[ -n "$lib" ] && { readelf -SW "$lib" | grep -E "eh_frame|gcc_except"; readelf -lW "$lib" | grep -i eh_frame; ldd "$lib"; } > "$OUT/library.txt" 2>&1
for m in cpp-torchcheck cu-torchcheck cu-std cpp-std product-cpu-tensor product-cpu-tensor-after-cuda product-bad-trip; do
  LD_PRELOAD=/tmp/segv.so timeout 30 python3 $D/probe.py $m > "$OUT/probe-$m.txt" 2>&1
  echo "== $m: exit $?"; tail -25 "$OUT/probe-$m.txt"
done 2>&1 | tee "$OUT/probes.txt"
# the tiny g++ op refusing a CPU tensor in a process that never made a CUDA context
PROBE_DEVICE=cpu LD_PRELOAD=/tmp/segv.so timeout 30 python3 $D/probe.py cpp-torchcheck > "$OUT/probe-cpp-torchcheck-cpu.txt" 2>&1
echo "== cpp-torchcheck on a CPU tensor, no CUDA context: exit $?" | tee -a "$OUT/probes.txt"
tail -5 "$OUT/probe-cpp-torchcheck-cpu.txt" | tee -a "$OUT/probes.txt"
# c10::Error captures a backtrace with glibc's backtrace() (libgcc's unwinder) as it is made;
# with these set torch captures it with its own unwinder instead: a crash that goes away here
# is in that capture, one that stays is in the throw's own unwinding.
for m in cu-torchcheck product-bad-trip; do
  TORCH_SHOW_CPP_STACKTRACES=1 TORCH_DISABLE_ADDR2LINE=1 LD_PRELOAD=/tmp/segv.so timeout 30 \
    python3 $D/probe.py $m > "$OUT/probe-$m-torch-unwinder.txt" 2>&1
  echo "== $m with torch's own unwinder: exit $?"; tail -25 "$OUT/probe-$m-torch-unwinder.txt"
done 2>&1 | tee -a "$OUT/probes.txt"
if which gdb >/dev/null; then
  timeout 40 gdb -batch -ex run -ex bt -ex 'info sharedlibrary' --args python3 $D/probe.py product-bad-trip > "$OUT/gdb.txt" 2>&1
  grep -A40 "SIGSEGV" "$OUT/gdb.txt" | head -60; grep -E "libgcc_s|libstdc" "$OUT/gdb.txt"
fi
