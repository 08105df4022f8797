"""Compile every Numba kernel of impls/ for every storage type (fp32, fp16, bf16's int16 bits)
and every argument type their binds pass. Run as a script (the simulator must be off before
numba.cuda is imported); prints one line per kernel and type, exits 1 if any fails.

``python tests/numba_compile.py``: PTX for sm_90 without a GPU. The simulator runs kernels as
Python and never types them, so this is what checks in CI that Numba can compile them. Needs
libnvvm and libdevice (a CUDA toolkit) and NVRTC (pip nvidia-cuda-nvrtc).
``python tests/numba_compile.py --gpu``: on a GPU, compile and load each one through its
dispatcher, as a bind does (from the disk cache in $HARNESS_CACHE/numba when it is there):
prints the seconds and the cache's hits and misses (run it twice: cold, then warm from the cache).
``python tests/numba_compile.py --ptx DIR``: also writes each kernel's PTX to DIR/<kernel and type>.ptx,
to diff the compiled code of two trees (a change that only moves code leaves every file the same);
with ``--all``, every row kernel of every type, as --gpu loads them, not the CPU's subset. Two
things differ between runs of one tree, so a diff sets them aside: the symbols (a function's
mangled name holds its module and a process-wide counter) and the order of the shared arrays'
declarations (numba-cuda links a kernel's device functions from a set, so from run to run two
reductions' 128-byte slot arrays can swap offsets, which changes the SASS's addresses only)."""
import os
import sys
import time
import traceback
from pathlib import Path

ON_GPU = "--gpu" in sys.argv
EVERY = ON_GPU or "--all" in sys.argv
PTX_DIR = Path(sys.argv[sys.argv.index("--ptx") + 1]) if "--ptx" in sys.argv[:-1] else None
os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
ARCH = (9, 0)
if ON_GPU:
    from impls._frameworks.numba import cachedir
    cachedir.configure()
else:
    os.environ["NUMBA_FORCE_CUDA_CC"] = "9.0"   # the device functions a kernel calls are typed for this

from numba import cuda  # noqa: E402

if not ON_GPU:
    from numba.cuda import dispatcher
    from numba.cuda.cudadrv import nvrtc

    # Without a GPU NVRTC is asked which architectures it supports, to pick the nearest: answer it.
    nvrtc.get_supported_ccs = lambda: (ARCH,)

    class _Device:   # what the dispatcher asks of "the current device" when it types a device function
        compute_capability = ARCH

    dispatcher.get_current_device = lambda: _Device()

import impls.copy.numba as copy  # noqa: E402
from impls._frameworks.numba import rows  # noqa: E402
import impls.layernorm.numba as layernorm  # noqa: E402
import impls.max.numba as max_  # noqa: E402
import impls.rmsnorm.numba as rmsnorm  # noqa: E402
import impls.rmsnorm_silu_mul_add.numba as chain  # noqa: E402
import impls.scale.numba as scale  # noqa: E402
import impls.softmax.numba as softmax  # noqa: E402
import impls.sum.numba as sum_  # noqa: E402

STORAGE = ("float32", "float16", "int16")   # fp32, fp16, bf16's bits
# The row kernels compiled for the 16-bit types on the CPU too (one variant an op: the others
# differ in arithmetic only, which fp32 covers).
SIXTEEN_BIT = ("rmsnorm", "chain fused", "softmax three_pass", "softmax on_chip", "layernorm welford")


def signatures():
    """(name, kernel, signature) for every kernel and every type its binds pass: contiguous
    arrays (1-D [::1], rows [:, ::1]), Python ints as int64, numpy float32 scalars, bools."""
    for t in STORAGE:
        v, m, w = f"{t}[::1]", f"{t}[:, ::1]", "uint64[::1]"
        r = f"{v}, {w}, int64, "   # a tensor as a row kernel takes it: elements, words, phase
        yield f"scale {t}", scale._scale, f"void({v}, {w}, {v}, {w}, int64, float32, int64)"
        yield f"sum partials {t}", sum_._partials, f"void({v}, {w}, int64, float32[::1], int64)"
        yield f"sum atomic {t}", sum_._atomic, f"void({v}, {w}, int64, float32[::1], float32[::1], int32[::1], int64)"
        yield f"max partials {t}", max_._partials, f"void({v}, {w}, int64, float32[::1], int64)"
        yield f"max atomic {t}", max_._atomic, f"void({v}, {w}, int64, float32[::1], int32[::1], int32[::1], int64)"
        # The row kernels: for each op and variant, one kernel for each row shape (whole, 16-byte
        # aligned chunks, or any rows) and keep (rows.keep: kept in registers, cached, read
        # again), over one body that Numba types and lowers once per argument types with every
        # branch in it (shape and keep are constants there, folded by NVVM after inlining): on the
        # CPU each variant's kernel for whole rows of each keep and its kernel for any rows once
        # (each element's bits, a path of its own per type), in fp32 and, for one variant an op,
        # the 16-bit types; the others add NVVM time, not coverage.
        rows_of = [("rmsnorm", rmsnorm.KERNELS, 3, "float32, int64"),
                   ("chain fused", chain.KERNELS, 5, "float32, int64"),
                   *((f"softmax {softmax.NAMES[a]}", {k[1:]: v for k, v in softmax.KERNELS.items() if k[0] == a}, 2,
                      "int64") for a in softmax.NAMES),
                   *((f"layernorm {layernorm.NAMES[a]}", {k[1:]: v for k, v in layernorm.KERNELS.items() if k[0] == a},
                      4, "float32, int64") for a in layernorm.NAMES)]
        for label, kernels, tensors, tail in rows_of:
            wanted = [(whole, keep) for whole, keep in kernels if EVERY
                      or ((t == "float32" or label in SIXTEEN_BIT) and (whole or keep == min(k for ww, k in kernels
                                                                                           if not ww)))]
            for whole, keep in wanted:
                yield (f"{label} {'whole' if whole else 'any'} {rows.KEEPS[keep]} {t}", kernels[whole, keep],
                       f"void({r * tensors}int64, int64, {tail})")
        yield f"chain step {t}", chain._step, f"void({v}, {w}, {v}, {w}, {v}, {w}, int64, int64, int64)"
        # The first kernels (naive.py): flat arrays, the row length, eps.
        yield f"softmax naive {t}", softmax._naive, f"void({v}, {v}, int64)"
        yield f"rmsnorm naive {t}", rmsnorm._naive, f"void({v}, {v}, {v}, int64, float32)"
        yield f"layernorm naive {t}", layernorm._naive, f"void({v}, {v}, {v}, {v}, int64, float32)"
    for t in ("int64", "int32", "int16"):
        yield f"copy {t}", copy._copy, f"void({t}[::1], {t}[::1], int64)"
    yield "sum finish", sum_._finish, "void(float32[::1], float32[::1], int64)"
    yield "max finish", max_._finish, "void(float32[::1], float32[::1], int64)"


def load_all() -> int:
    """Compile (or load from the disk cache) every kernel through its dispatcher, as binds do."""
    started, hits, misses = time.perf_counter(), 0, 0
    for name, kernel, signature in signatures():
        kernel.compile(signature)
    for kernel in {id(k): k for _, k, _ in signatures()}.values():
        hits += sum(kernel.stats.cache_hits.values())
        misses += sum(kernel.stats.cache_misses.values())
    print(f"numba: {len(list(signatures()))} kernels and types compiled or loaded in "
          f"{time.perf_counter() - started:.1f} s: {hits} from the disk cache, {misses} compiled "
          f"(cache {os.environ.get('NUMBA_CACHE_DIR')})")
    return 0


def main() -> int:
    if ON_GPU:
        return load_all()
    failed = 0
    for name, kernel, signature in signatures():
        started = time.perf_counter()
        try:
            ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=ARCH)
            local = "local" if ".local" in ptx else "registers"
            if PTX_DIR is not None:
                PTX_DIR.mkdir(parents=True, exist_ok=True)
                (PTX_DIR / f"{name.replace(' ', '_')}.ptx").write_text(ptx)
            print(f"ok    {name:24s} {time.perf_counter() - started:5.1f} s  {len(ptx):7d} chars of PTX, "
                  f"unrolled values in {local}")
        except Exception:  # noqa: BLE001 - report every kernel, then fail
            failed += 1
            print(f"FAIL  {name}: {signature}\n{traceback.format_exc(limit=40)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
