"""Triton. On a CUDA GPU for real; on a CPU under Triton's interpreter (TRITON_INTERPRET=1),
which the harness switches on itself: correct results, no timing claims."""
import os

from harness.registry import Framework


class Triton(Framework):
    name = "triton"

    def prepare(self, device):
        # Read by @triton.jit when the impl modules are imported: set it before that.
        if device.type == "cpu":
            os.environ.setdefault("TRITON_INTERPRET", "1")
            _round_bf16_like_the_gpu()

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


# --- helpers shared by the Triton impls ---------------------------------------------

# Cache hints for data that is read once and written once. Whether they help is measured,
# not assumed (on the H200, a copy with evict_first loads ran at 92% of torch's copy_,
# a plain one at ~100%): every tuned kernel tries both, as constexprs LOAD and STORE.
HINTS = {"plain": {"LOAD": "", "STORE": ""},
         "stream": {"LOAD": "evict_first", "STORE": ".cs"}}

_tuned: dict = {}
_timers: dict = {}


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def sm_count(device) -> int:
    import torch
    if getattr(device, "type", "cpu") != "cuda":
        return 4     # the interpreter: a few programs exercise the grid-stride loops
    return torch.cuda.get_device_properties(device).multi_processor_count


def tune(key, candidates: list[dict], run) -> dict:
    """The fastest of ``candidates`` for ``key``, measured once per process with
    ``run(config)`` by the harness's own CUDA timer, outside any timed region.
    Under the interpreter there is nothing to measure: the first candidate is used."""
    if key in _tuned:
        return _tuned[key]
    if interpreting() or len(candidates) == 1:
        _tuned[key] = candidates[0]
        return candidates[0]
    import torch
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources

    from harness.timing import CudaTimer, TimingBudget
    # Measured the way the harness measures (cold L2 by a read-only flush, CUDA events),
    # so that the configuration tuned for is the one the sweep then times.
    device = torch.device("cuda", torch.cuda.current_device())
    timer = _timers.get(device) or _timers.setdefault(device, CudaTimer(device))
    budget = TimingBudget(warmup_ms=2, min_samples=10, max_samples=200, max_seconds=0.1,
                          graph_below_bytes=0)
    best, best_us = None, float("inf")
    for cfg in candidates:
        try:
            us = timer.time(lambda: run(cfg), budget, 1 << 30).median_us
        except (CompilationError, OutOfResources):   # a config that does not fit: skip it
            continue
        if us < best_us:
            best, best_us = cfg, us
    if best is None:
        raise RuntimeError(f"no Triton config ran for {key}: {candidates}")
    _tuned[key] = best
    return best


def configured(launch, config: dict):
    """Attach the launch configuration to a launcher: the record shows what ran."""
    launch.config = dict(config)
    return launch


def launch_1d(kernel, args: tuple, n: int, key, device, extra: dict | None = None):
    """A launcher for an elementwise kernel ``kernel[grid](*args, n, BLOCK=...)``, one
    BLOCK-sized tile per program. BLOCK and num_warps are tuned per ``key`` (the config
    changes no result bits for an elementwise op, so tuning on the real inputs is safe)."""
    import triton
    if interpreting():
        candidates = [dict(BLOCK=1024, num_warps=4, hints="plain")]
    else:
        # 8 to 16 elements per thread: every thread has two to four independent 16-byte
        # loads in flight (the seed text's two knobs, vector width and loads per thread).
        candidates = [dict(BLOCK=b, num_warps=w, hints=h) for b, w in ((1024, 4), (2048, 4), (4096, 8), (8192, 8))
                      for h in HINTS]

    def run(cfg):
        kernel[(triton.cdiv(n, cfg["BLOCK"]),)](*args, n, **(extra or {}), BLOCK=cfg["BLOCK"],
                                                num_warps=cfg["num_warps"], **HINTS[cfg["hints"]])

    cfg = tune(key, candidates, run)
    return configured(lambda: run(cfg), cfg)


# --- row ops (softmax, norms): one program per row, or a persistent grid of them -------

# Rows up to this many elements stay in registers (one read of x); longer rows are
# walked in tiles of ROW_TILE with a column loop (x read again from L2 or memory).
MAX_ON_CHIP = 32768
ROW_TILE = 4096


def row_tile(custom_combine: bool = False) -> int:
    """The column tile of looped rows. The interpreter runs tl.reduce's custom combines
    (online softmax, Welford) one element at a time in Python: those get narrow tiles."""
    return 64 if custom_combine and interpreting() else ROW_TILE
SCRATCH_BYTES = 256 << 20   # the tuning problem: large enough to stream from memory


def row_block(cols: int, custom_combine: bool = False) -> tuple[int, bool]:
    """(BLOCK, on_chip) for rows of ``cols`` elements."""
    if cols <= MAX_ON_CHIP:
        return next_pow2(cols), True
    return row_tile(custom_combine), False


def row_candidates(block: int) -> list[dict]:
    """~16 (or 8) elements per thread; each tried one row per program and persistent
    (8 programs per SM walking rows, loading the weights once per program), with and
    without streaming cache hints."""
    warps = min(32, max(4, block // 512))
    options = sorted({warps, max(4, warps // 2)}, reverse=True)
    return [dict(num_warps=w, persistent=p, hints=h) for w in options for p in (False, True) for h in HINTS]


def row_kwargs(cfg: dict) -> dict:
    """The launch keywords of a row config: warps and the cache-hint constexprs."""
    return {"num_warps": cfg["num_warps"], **HINTS[cfg["hints"]]}


def row_programs(cfg: dict, rows: int, device) -> int:
    return min(rows, 8 * sm_count(device)) if cfg["persistent"] else rows


def tune_rows(key, cols: int, block: int, dtype, device, make_scratch, run) -> dict:
    """Tune a row kernel once per ``key`` (op, variant, cols, dtype) on a scratch problem
    of ~256 MiB, whatever the batch at hand: the choice, and so every row's bits, depend
    on the row length and dtype only, never on the number of rows (batch invariance).
    ``block`` is the kernel's BLOCK (the row, or its column tile); ``make_scratch(rows)``
    builds the arguments and ``run(cfg, args, rows)`` launches."""
    candidates = row_candidates(block)
    if key in _tuned or interpreting():
        return tune(key, candidates, None)
    rows = max(1, SCRATCH_BYTES // (cols * dtype.itemsize))
    args = make_scratch(rows)
    cfg = tune(key, candidates, lambda c: run(c, args, rows))
    del args
    return cfg
