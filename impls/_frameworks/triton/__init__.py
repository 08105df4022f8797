"""Triton. On a CUDA GPU for real; on a CPU under Triton's interpreter (TRITON_INTERPRET=1),
which the harness switches on itself: correct results, no timing claims.

The package imports without Triton (the registry asks it whether it is usable); its
modules, one job each, are imported by the impls:
- launch: one bound launch per config, the arguments worked out once; builds before timing
- occupancy: how many programs an SM runs, the persistent grid
- elementwise: the 1-D kernels' tiles (copy, scale), from the config table
- rows: the row kernels' config space, rule and launcher
- device: Triton device functions shared by the row kernels
- roof: plain streaming reads and copies that the roof times beside torch's (roof_kernels)
- tree_reduce: tl.reduce's own combines as a tree under the interpreter (CPU)
"""
import os

from harness.registry import OURS, Framework


class Triton(Framework):
    name = "triton"
    role = OURS
    packages = ("triton",)

    def prepare(self, device):
        # Read by @triton.jit when the impl modules are imported: set it before that.
        if device.type == "cpu":
            os.environ.setdefault("TRITON_INTERPRET", "1")
            _round_bf16_like_the_gpu()
            from impls._frameworks.triton.tree_reduce import reduce_in_a_tree
            reduce_in_a_tree()
        else:
            try:
                _one_cache_for_the_run()
            except ImportError:
                pass

    def unusable(self, device):
        try:
            import triton  # noqa: F401
        except ImportError as e:
            return f"triton is not installed ({e}); pip install triton"
        if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
            return "Triton runs on a CPU only under its interpreter: set TRITON_INTERPRET=1"
        if device.type not in ("cpu", "cuda"):
            return f"Triton does not run on {device.type}"
        return None

    def interpreted(self, device):
        return device.type == "cpu"

    def roof_kernels(self, src, dst):
        from impls._frameworks.triton import roof   # imports triton: without it, an ImportError
        return {"read": roof.reads(src), "mix": roof.mixes(src, dst), "copy": roof.copies(src, dst)}


def _round_bf16_like_the_gpu():
    """Triton 3.6's interpreter converts fp32 to bf16 by truncation (its cast passes no
    rounding mode), where the GPU's cvt.rn rounds to nearest even: bf16 results on the CPU
    would be up to one ulp off for no fault of the kernel. Give the interpreter the GPU's
    rounding for that one conversion."""
    try:
        import numpy as np
        from triton.runtime import interpreter
        import triton.language as tl
    except ImportError:
        return
    original = interpreter._convert_float
    if getattr(original, "rounds_to_nearest", False):
        return

    def convert(input, input_dtype, output_dtype, rounding_mode):
        if input_dtype == tl.float32 and output_dtype == tl.bfloat16:
            bits = np.ascontiguousarray(input).view(np.uint32)
            rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
            nan = (bits & 0x7FFFFFFF) > 0x7F800000
            rounded[nan] = ((bits[nan] >> 16) | 0x0040).astype(np.uint16)   # quiet NaN, sign kept
            return rounded
        return original(input, input_dtype, output_dtype, rounding_mode)

    convert.rounds_to_nearest = True
    interpreter._convert_float = convert


def _one_cache_for_the_run() -> None:
    """Every process of the run, and the next run, finds the binaries the others built in one
    Triton cache: TRITON_CACHE_DIR is set here, in the harness's process before its workers
    start (they inherit it), to Triton's own default where the user set none. Without it,
    torch.compile's Inductor points TRITON_CACHE_DIR at a folder of its own in the process
    that compiles, and that process's later Triton kernels compile again where they had a
    binary (on the H200 a 4096-column fp32 RMSNorm tuning took 3.2 s after torch.compile's
    case, 0.6-1.1 s alone)."""
    from triton import knobs
    os.environ.setdefault("TRITON_CACHE_DIR", knobs.cache.dir)
