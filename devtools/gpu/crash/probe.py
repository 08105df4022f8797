"""One probe of how a C++ exception thrown in an extension op reaches Python on this host:
python probe.py MODE. Modes build a tiny TORCH_LIBRARY op whose body refuses (TORCH_CHECK or
std::runtime_error), compiled by g++ (cpp) or nvcc (cu), or call the harness's own refusal:
product-cpu-tensor (x on the CPU, refused by the first check, no CUDA context), the same
after-cuda (a context made first), product-bad-trip (CUDA tensors, a bad trip). On this CPU
with torch 2.11.0+cu130 and nvcc 13.0, product-cpu-tensor raises RuntimeError as it should."""
import os
import sys

import torch
from torch.utils import cpp_extension

mode = sys.argv[1]
BODY = r"""
#include <torch/extension.h>
#include <stdexcept>
%(kernel)s
at::Tensor refuse(at::Tensor x) {
  %(throw)s
  return x;
}
TORCH_LIBRARY(probe_%(name)s, m) { m.def("refuse", &refuse); }
"""
KERNEL = "__global__ void touch(float* p) { p[threadIdx.x] += 1.0f; }"
if mode.startswith("product-"):
    from impls._frameworks.cuda import build
    ops = build.load()
    if mode == "product-cpu-tensor-after-cuda":   # the same refusal once the process holds a CUDA context
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
    on_cuda = mode == "product-bad-trip"   # a CUDA tensor and a bad trip; else a CPU tensor, a good config
    x = torch.randn(3, 100, device="cuda" if on_cuda else "cpu", dtype=torch.bfloat16)
    trip = 3 if on_cuda else 1
    call = lambda: ops.rmsnorm(x, x[0], 1e-6, torch.empty_like(x), 64, 64, 0, trip)
else:
    compiler, throw = mode.split("-")
    src = BODY % {"kernel": KERNEL if compiler == "cu" else "", "name": mode.replace("-", "_"),
                  "throw": 'TORCH_CHECK(false, "refused by ", 42);' if throw == "torchcheck"
                  else 'throw std::runtime_error("refused by 42");'}
    kw = dict(cuda_sources=[src], cpp_sources=[""]) if compiler == "cu" else dict(cpp_sources=[src])
    cpp_extension.load_inline(name=f"probe_{mode.replace('-', '_')}", is_python_module=False,
                              build_directory=None, verbose=False, extra_cflags=["-O3"], **kw)
    x = torch.zeros(4, device=os.environ.get("PROBE_DEVICE", "cuda"))
    call = lambda: getattr(torch.ops, f"probe_{mode.replace('-', '_')}").refuse(x)
libs = sorted({line.split()[-1] for line in open("/proc/self/maps") if any(
    n in line for n in ("libgcc_s", "libstdc++", "libunwind"))})
print(mode, "built; calling; unwinders and C++ runtimes loaded:", ", ".join(libs), flush=True)
try:
    call()
except Exception as e:  # noqa: BLE001
    print(mode, "raised", type(e).__name__, str(e).splitlines()[0], flush=True)
else:
    print(mode, "returned without an error", flush=True)
