"""Triton. On a CUDA GPU for real; on a CPU under Triton's interpreter (TRITON_INTERPRET=1),
which the harness switches on itself: correct results, no timing claims."""
import functools
import hashlib
import inspect
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness import progress
from harness.registry import OURS, Framework
from impls._frameworks import tuning_cache


class Triton(Framework):
    name = "triton"
    role = OURS

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


# Switches that change when and how the bytes move, never which arithmetic runs on which
# elements in which order: configs that differ only in these give identical bits, so a
# batch may take its own without losing batch invariance. The tuner also compares the
# bits candidates actually write (same_bits): other tile shapes can share them too.
BIT_NEUTRAL = ("persistent", "hints", "prefetch", "early", "ordered", "reload", "maxnreg", "predicated")


@dataclass
class Tuned:
    """A tuner's choice and the table it chose from: every candidate tried, with its
    times on each tuning problem (empty under the interpreter, or with one candidate).
    ``batches``: [rows, config] per tuning problem of a row kernel, the config fastest
    there among those giving ``config``'s bits (None: ``config`` itself)."""
    config: dict
    table: dict = field(default_factory=dict)
    batches: list = field(default_factory=list)

    def for_rows(self, rows: int) -> dict:
        """The config for a batch of ``rows``: the one tuned on the problem nearest to it
        in rows, on a log scale (16 rows: latency-bound; 2048: a few waves; ~256 MiB:
        bandwidth-bound). All give the same bits, so any batch may take any of them."""
        if not self.batches:
            return self.config
        n, config = min(self.batches, key=lambda b: abs(math.log(max(rows, 1) / b[0])))
        return {**config, "tuned_for_rows": n} if config else self.config


# What the tuner adds to a config when it measures it: its times on the three problems
# (TIMES, by problem: ~256 MiB, MID_ROWS, SMALL_ROWS), a digest of the bits it wrote
# on the large one (None where there is no output), its register count and its grid (_observed).
TIMES = ("us", "mid_us", "small_us")
MEASURED = (*TIMES, "bits", "regs", "programs")


def config_of(candidate: dict) -> dict:
    """A measured candidate without its measurements: the config to launch."""
    return {k: v for k, v in candidate.items() if k not in MEASURED}


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def sm_count(device) -> int:
    import torch
    if getattr(device, "type", "cpu") != "cuda":
        return 4     # the interpreter: a few programs exercise the grid-stride loops
    return torch.cuda.get_device_properties(device).multi_processor_count


# Samples per candidate: a short budget, since a tuner measures many. A small batch takes
# more: its ~5 us spread over ~1 us sample to sample (cold L2, launch), and 200 samples
# left its median uncertain by about the gap between two configs (r11 tables, ~0.1 us).
TUNING_SAMPLES = 200
SMALL_TUNING_SAMPLES = 1000


def _timer(samples: int = TUNING_SAMPLES):
    """The harness's CUDA timer and a short budget: candidates are measured the way the
    harness measures (cold L2 by a read-only flush, CUDA events), so that the config
    tuned for is the one the sweep then times."""
    import torch

    from harness.timing import CudaTimer, TimingBudget
    device = torch.device("cuda", torch.cuda.current_device())
    timer = _timers.get(device) or _timers.setdefault(device, CudaTimer(device))
    budget = TimingBudget(warmup_ms=2, min_samples=10, max_samples=samples, max_seconds=0.1 * samples / TUNING_SAMPLES,
                          graph_below_bytes=0)
    return timer, budget


def _measure(run, samples: int = TUNING_SAMPLES) -> float | None:
    """Median microseconds of ``run()``, or None for a config that does not compile or fit."""
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources
    timer, budget = _timer(samples)
    try:
        return timer.time(run, budget, 1 << 30).median_us
    except (CompilationError, OutOfResources):
        return None


# The tuner's own source: a change to it (its candidates, its rules) retires every choice
# kept on disk (tuning_cache).
_TUNER_SOURCE = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def _environment(device) -> dict:
    """What a measurement depends on besides the code: the GPU and the software stack."""
    import torch
    import triton
    return {"gpu": torch.cuda.get_device_name(device), "capability": list(torch.cuda.get_device_capability(device)),
            "triton": triton.__version__, "torch": torch.__version__, "cuda": torch.version.cuda}


def _cache_entry(key, kernel, device, **inputs) -> str | None:
    """The tuning cache's entry for ``key``: the kernel's source with its callees (Triton's
    cache_key), the tuner's source, what the tuner was given, the machine. None without a
    kernel to hash (stand-ins)."""
    if kernel is None:
        return None
    return tuning_cache.entry_key(key, {"kernel": kernel.cache_key, "tuner": _TUNER_SOURCE, "inputs": inputs,
                                        **_environment(device)})


def _remembered(key, entry: str | None) -> Tuned | None:
    """The choice kept on disk for ``entry``, now also this process's, its table marked
    as read from the cache."""
    hit = tuning_cache.load(entry) if entry else None
    if hit is None:
        return None
    try:
        table = {**hit["table"], "source": "cache", "measured_at": hit["measured_at"]}
        return _tuned.setdefault(key, Tuned(dict(hit["config"]), table, list(hit["batches"])))
    except (KeyError, TypeError):
        return None   # kept in another form: measure


def _keep(key, entry: str | None, tuned: Tuned) -> Tuned:
    """A fresh measurement: this process's choice, and kept on disk."""
    if entry:
        stamped = tuning_cache.store(entry, asdict(tuned))
        tuned = Tuned(tuned.config, {**tuned.table, "source": "measured", "measured_at": stamped["measured_at"]},
                      tuned.batches)
    return _tuned.setdefault(key, tuned)


def _name(key) -> str:
    """A tuning key as a progress line shows it."""
    return " ".join(map(str, key)) if isinstance(key, tuple) else str(key)


def tune(key, candidates: list[dict], bind, kernel=None, device=None) -> Tuned:
    """The fastest of ``candidates`` for ``key``, measured by timing the launcher
    ``bind(config)`` returns, outside any timed region; once per process, and kept on
    disk for ``kernel`` on this ``device`` (tuning_cache). Under the interpreter there is
    nothing to measure: the first candidate is used."""
    if key in _tuned:
        return _tuned[key]
    if interpreting() or len(candidates) == 1:
        return _tuned.setdefault(key, Tuned(candidates[0]))
    entry = _cache_entry(key, kernel, device, candidates=candidates)
    if remembered := _remembered(key, entry):
        return remembered
    progress.phase(f"tuning Triton {_name(key)}: {len(candidates)} configs")
    rows = [{**cfg, "us": _measure(bind(cfg))} for cfg in candidates]
    ran = [r for r in rows if r["us"] is not None]
    if not ran:
        raise RuntimeError(f"no Triton config ran for {key}: {candidates}")
    best = min(ran, key=lambda r: r["us"])
    return _keep(key, entry, Tuned(config_of(best), {"candidates": rows}))


def configured(launch, config: dict, tuning: dict | None = None):
    """Attach the launch configuration (and the tuner's table) to a launcher: the record
    shows what ran and what it was chosen from."""
    launch.config = dict(config)
    launch.tuning = dict(tuning or {})
    return launch


def kernel_args(kernel, args: tuple, kwargs: dict) -> tuple:
    """Every parameter of ``kernel`` in its signature's order, constexprs included (what a
    compiled Triton kernel's launcher takes): the positional ``args``, then each remaining
    parameter from ``kwargs`` or its default. Options (num_warps) are not parameters."""
    params = inspect.signature(kernel.fn).parameters
    if len(args) > len(params):
        raise TypeError(f"{kernel.fn.__name__} takes {len(params)} arguments, got {len(args)} positional")
    given = {**dict(zip(params, args)), **{k: v for k, v in kwargs.items() if k in params}}
    missing = [n for n, p in params.items() if n not in given and p.default is inspect.Parameter.empty]
    if missing:
        raise TypeError(f"{kernel.fn.__name__}: no value for {', '.join(missing)}")
    return tuple(given.get(n, p.default) for n, p in params.items())


def bound_launch(kernel, grid: tuple, *args, **kwargs):
    """A launcher (no arguments) of ``kernel[grid](*args, **kwargs)``, all of it fixed.
    The first launch goes through Triton's dispatch (JITFunction.run: it binds every
    argument, specialises each on its value and alignment, hashes a cache key, compiles
    on a miss) and keeps the compiled kernel it returns; later launches call that kernel's
    launcher directly with the same arguments, on the current stream (so that a CUDA graph
    capture records them). The dispatch is the same work every time here, since the
    arguments never change, and a caller launching a few rows back to back waits on the
    host. (The harness's timer keeps the host ahead of the GPU, so its times do not show
    this: r7 measured no change.) Under the interpreter every launch dispatches."""
    jit = kernel[grid]
    if interpreting():
        return lambda: jit(*args, **kwargs)
    full = kernel_args(kernel, args, kwargs)
    run = None

    def launch():
        nonlocal run
        if run is None:
            compiled = jit(*args, **kwargs)     # compiles, or finds the cached binary, and launches
            run = compiled[(*grid, 1, 1)[:3]]   # its own launcher: takes a 3-D grid, all the parameters
            launch.registers = compiled.n_regs  # per thread, as loaded (the tuning table's regs)
            launch.binary = compiled
            return
        run(*full)
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

    def bind(cfg):
        return bound_launch(kernel, (triton.cdiv(n, cfg["BLOCK"]),), *args, n, **(extra or {}), BLOCK=cfg["BLOCK"],
                            num_warps=cfg["num_warps"], **HINTS[cfg["hints"]])

    tuned = tune(key, candidates, bind, kernel, device)
    return configured(bind(tuned.config), tuned.config, tuned.table)


# --- row ops (softmax, norms, the chain): tiles of rows, one per program step ----------

# Rows up to this many elements stay in registers (one read of x); longer rows are
# walked in tiles of ROW_TILE with a column loop (x read again from L2 or memory).
MAX_ON_CHIP = 32768
ROW_TILE = 4096
SCRATCH_BYTES = 256 << 20   # the tuning problem: large enough to stream from memory
SMALL_ROWS = 16             # the second tuning problem: a batch too small to fill the GPU
MID_ROWS = 2048             # the third: a few waves, still latency-bound (r13: 1823x781
                            # bf16 LayerNorm 8.7 us, 2.8 MB read: 0.7 us of bandwidth)
SMALL_SLACK = 0.01          # how much large-problem time buys a faster small problem
TOGGLE_SLACK = 0.03         # how close to the fastest a shape's family must run the large
                            # problem for its small-batch toggles to be measured there too:
                            # a toggle moves a config by more than SMALL_SLACK (r93, H200,
                            # LayerNorm fp32 4096 columns, 16384 rows: looped 2048/8w 127.39
                            # us, with EARLY 125.61, the fastest of all; a band of SMALL_SLACK
                            # had left its family out, 1.01% behind looped 2048/16w in the
                            # tuner's table before it)
SMALL_TIE = 0.01            # small-problem times this close are equal: ~0.05 us at 5 us, about
                            # the median's uncertainty over 1000 samples and 1.5 ticks of the
                            # 32 ns event clock (softmax 16384x8192 bf16, H200: 8 warps' 5.31
                            # us at 16 rows against 16 warps' 5.34 cost 0.6% at 256 MiB)
TILE_ELEMENTS = 8192        # the most elements of a tile of several rows
INTERPRETED_PER_SM = 8      # programs per SM of a persistent grid under the interpreter


def row_tile(custom_combine: bool = False) -> int:
    """The column tile of looped rows. The interpreter runs tl.reduce's custom combines
    (online softmax, Welford) one element at a time in Python: those get narrow tiles."""
    return 64 if custom_combine and interpreting() else ROW_TILE


def row_block(cols: int, custom_combine: bool = False) -> tuple[int, bool]:
    """(BLOCK, on_chip) for rows of ``cols`` elements."""
    if cols <= MAX_ON_CHIP:
        return next_pow2(cols), True
    return row_tile(custom_combine), False


def tile_shapes(block: int, on_chip: bool, max_rows: int = 4, itemsize: int = 4) -> list[tuple[int, int]]:
    """(rows per tile, num_warps) to try: tiles of 1 to ``max_rows`` rows (on the H200,
    tiles of 8 short rows never won and cost a compile each; several rows only
    while a tile holds at most TILE_ELEMENTS), each with 8, 16 or 32 elements per thread:
    one to four 16-byte loads in flight per thread for 16-bit data, two to eight for fp32;
    and 16-bit data also 64 (128 bytes, as fp32's 32): half the warps, so half the
    cross-warp steps of each reduction (at hidden 8192 in bf16, r3 measured LayerNorm
    with 8 warps 24% faster than with 16)."""
    shapes = []
    for rows in (1, 2, 4, 8):
        if rows > (max_rows if on_chip else 1) or (rows > 1 and rows * block > TILE_ELEMENTS):
            break
        for per_thread in sorted({8, 16, 32, 128 // itemsize}):
            warps = min(32, max(1, rows * block // (32 * per_thread)))
            if (rows, warps) not in shapes:
                shapes.append((rows, warps))
    return shapes


# Switches a row kernel may take as constexprs (PREFETCH, EARLY, ORDERED, RELOAD): tried by the
# tuner only for kernels that have them (``options``), and off otherwise. "looped"
# (loop_block > 0): a row that would fit on chip is walked in column tiles instead, kept
# in L2 between passes. "looped_early": the kernel's EARLY applies to such a looped row
# too (its second pass then holds the whole row, its other operands loaded up front).
ROW_OPTIONS = ("prefetch", "early", "ordered", "looped")
SWITCHES = ("prefetch", "early", "ordered", "reload")   # the constexpr switches among the options
# What a batch too small to fill the GPU wants: its operands' loads out with x's, not
# after x's reduction (r10 probe, H200, LayerNorm two_pass 16x4096 bf16: 5.76 us on 8
# warps plain, 5.22 with EARLY; on 2 warps, the large problem's choice, 6.08 and 5.44).
# Bit-neutral, so each shape fast enough on the large problem is measured with them too.
# (An L2 prefetch of those operands ahead of x's loads, tried in r10, gained nothing at
# 16 rows and ran the large problem up to 5x slower: every program asked for g again.)
# EARLY loads them before x's reduction, yet ptxas issues them only once x has arrived;
# ORDERED loads them, then x, as volatile loads, which it keeps in that order: all out
# at once (_triton_rows), but a volatile load is slow: on 8 warps ORDERED ran LayerNorm fp32
# 4096x4096 in 42.5 us, EARLY in 32.5 (r93). "predicated" (an option): EARLY on a row that
# fills its block, its loads masked on the row's length all the same (EVEN off: bit-neutral,
# no element is masked). ptxas then issues g's and b's loads with x's, before the first
# shuffle, as in Liger's kernel (sm_90, LayerNorm fp32 4096 on 8 warps: 12 of 12 loads,
# unmasked 5); r94 (H200): 32.12 us at 4096x4096 against 32.53 unmasked and Liger's kernel
# 32.38; 18.53 at 2048 rows against 18.84 and 18.72. Each toggle is measured on its own.
SMALL_BATCH_TOGGLES = ({"early": True}, {"ordered": True}, {"early": True, "predicated": True})
SMALL_BATCH_SWITCHES = tuple(s for t in SMALL_BATCH_TOGGLES for s in t)
# (column tile, num_warps) of looped rows. torch.compile's looped RMSNorm, at ~100% of the
# roof on the H200, runs XBLOCK 1, R0_BLOCK 2048 or 4096 and 16 warps (its best_config
# files, r4) with the row length a compile-time constant: the column loop unrolls and all
# of a row's loads are in flight at once, on ~30 registers (x is read again from L2, not
# held), so four 16-warp programs fit per SM. A looped row that fits on chip gets the same
# here: the loop runs to SPAN, a constexpr (row_launcher). (2048, 4) never won on the H200.
LOOPED_SHAPES = ((2048, 8), (2048, 16), (4096, 8), (4096, 16))
# Registers decide how many programs share an SM: sm_90 has 64K per SM and runs at most
# 2048 threads, so a 16-warp program of more than 32 registers per thread leaves thread
# slots empty. The chain's looped fp16 kernel (4096-tiles, 16 warps) takes 48 where bf16
# takes 40 (two programs per SM against three; r8 measured it 10% slower); capped at 32
# (ptxas's maxnreg) it compiles without spills. Capped looped shapes are candidates too:
# a cap moves no arithmetic, only registers. Not on chip: r45 (H200, LayerNorm fp32 4096
# columns) measured 16-warp tiles capped at 32 (from 40-59) 8-89% slower on ~256 MiB: each
# thread then holds fewer of its loads in flight. The tuning table keeps each candidate's
# register count (regs) for such questions. Nor on 8 warps: one fp32 row of 4096 capped at
# 32 (8 programs an SM) ran 30-40% slower than uncapped (r92).
FULL_OCCUPANCY_REGS = 65536 // 2048


def static_cols(cols: int, block: int) -> int:
    """The row length a row kernel is compiled for (its COLS), or 0: compiled for any. A row
    shorter than its block (781 columns in a block of 1024) is compiled for its length:
    its masks then fold register by register, and the padding costs no stores and no mask
    tests (softmax's, no loads or exps either). On sm_90 the 1-warp softmax at 781 bf16
    compiles to 392 instructions on 37 registers instead of 656 on 72, LayerNorm two_pass
    to 704 on 79 instead of 992 on 134 (torch.compile's kernel, specialised on 781 too: 832
    on 80); on the H200 softmax went from 0.97x to 1.07-1.09x Liger at 1823x781 (r27). A
    row that fills its block has no masks to fold, and its length as a constant moved
    registers both ways (softmax 16384 fp16 on 8 warps: 80 -> 86, one program per SM fewer,
    4.6% slower on 256 MiB; fp32 8192 on 16 warps: 32 -> 40): it keeps the kernel it was
    tuned with. So does a row longer than its block, walked in column tiles: only its last
    tile is masked, and the constant moved registers both ways there too (bf16, 4096-tiles
    on 8 warps: RMSNorm at 4000037 columns 109 -> 115, the Welford LayerNorm 194 -> 237)."""
    return cols if cols < block else 0


# The width an on-chip kernel with a FOLD parameter folds its rows' sums to (row_sums): the
# narrowest column tile of LOOPED_SHAPES, so that an on-chip tile can write the bits of a
# looped row on as many warps. r38 (H200, LayerNorm two_pass fp32 4096 columns): the ~256
# MiB problem chose 2048-column tiles on 16 warps (126.3 us, on-chip tiles 128.8 at best),
# which ran 4096 rows in 34.4 us; on-chip tiles ran them in 32.4 (r35 probe) but wrote other
# bits, so that batch could not take them.
# Tried and reverted (06c7901): a tile on 8 warps whose columns were permuted in 16-byte
# vectors so that each thread held the two vectors the 16-warp tree pairs at its first
# shuffle, which then reduced in that tree's order at no extra shuffle (sm_90: the same
# SHFL, LDS/STS and 16-byte accesses). On the H200 (r46) it wrote the 16-warp bits, every
# tile shape, fp32 and bf16, but ran 4096x4096 fp32 in 35.2 us against the 16-warp row's
# 33.4 (the unpermuted 8-warp row: ~33.0, r35), and the 2048-row problem 5% slower than
# unpermuted: a warp's accesses split into 256-byte pieces 4 KiB apart. Level at ~256 MiB.
# Tried twice and reverted (f8621d9 -> 742fc6f; 1ab8e53 -> f6b9f6d): one fp32 row on 8
# warps, each thread's two layout repeats reduced across lanes apart, then added (the
# 16-warp tree's first cross-warp step), then across warps: the 16-warp bits on the tile's
# own layout (sm_90: 10 more shuffles, no more shared memory; the digests agreed, r43, r58).
# The 4096-row batch still ran it slower than one row on 16 warps: 33.54 against 33.12 us
# (r43), 33.54 with g, b early against 33.22 (r58); under the sweep's budget 33.77-33.90
# against 33.75-33.95, Liger's kernel 33.53-33.66 (r59 probe). The 8-warp row's 32.5 us in
# some probes (r35, r37, r54) did not hold in others (34.1-34.8, r51, r60); not the timing
# budget, which r60 ruled out: the runs differed. A third time as a probe (r92-r93, 8cf64c9:
# HALVES, with g and b early, 32.66 us against the 16-warp row's 32.63; capped at 32
# registers for 8 programs an SM, 43.25). What did move that batch ahead of Liger was the
# 8-warp bits themselves (SMALL_BATCH_TOGGLES' predicated, _choose; r96: 1.014x).
ROW_FOLD = min(b for b, _ in LOOPED_SHAPES)


def fold_width(block: int, num_warps: int, itemsize: int) -> int:
    """FOLD for an on-chip row of ``block`` elements on ``num_warps`` warps, or 0: no fold.
    A fold is register adds only where every thread holds both element j and j + ROW_FOLD:
    Triton lays a row out in 16-byte runs per thread, 32 lanes, the warps, repeated, so
    where that repeat divides ROW_FOLD (fp32 on 16 warps: 4 x 32 x 16 = 2048). Elsewhere it
    would move data between warps through shared memory, for bits no looped config has."""
    repeat = (16 // itemsize) * 32 * num_warps
    return ROW_FOLD if block > ROW_FOLD and ROW_FOLD % repeat == 0 else 0


@functools.cache
def _libcuda():
    import ctypes
    return ctypes.CDLL("libcuda.so.1")


def programs_per_sm(compiled) -> int:
    """How many programs of a compiled Triton kernel an SM runs at once: the CUDA driver's
    occupancy calculator (cuOccupancyMaxActiveBlocksPerMultiprocessor) on the loaded binary,
    which counts its threads, its registers as allocated and its shared memory."""
    import ctypes
    compiled._init_handles()   # loads the binary (Triton does it lazily, at the first launch)
    count = ctypes.c_int(0)
    threads = compiled.metadata.num_warps * 32
    err = _libcuda().cuOccupancyMaxActiveBlocksPerMultiprocessor(
        ctypes.byref(count), ctypes.c_void_p(compiled.function), ctypes.c_int(threads),
        ctypes.c_size_t(compiled.metadata.shared))
    if err:
        raise RuntimeError(f"cuOccupancyMaxActiveBlocksPerMultiprocessor failed (CUresult {err}) for "
                           f"{compiled.name}: {threads} threads, {compiled.metadata.shared} bytes of shared memory")
    return max(1, count.value)


def threads_per_sm(device) -> int:
    import torch
    return torch.cuda.get_device_properties(device).max_threads_per_multi_processor


def persistent_programs(kernel, tiles: int, device, args: tuple, kwargs: dict) -> int:
    """The grid of a persistent launch: as many programs as the GPU runs at once, at most one
    per tile. Its programs split the tiles evenly (pid, pid + programs, ...), so a program
    that waited for a free slot would run its whole share after the others had finished
    theirs: a second, part-empty wave. (A fixed 8 per SM, as before, asked for 128 warps
    per SM of a 16-warp kernel, which runs 64 at most; and for 8 of an 8-warp kernel on 45
    registers, of which 5 fit.) The count comes from the compiled kernel (programs_per_sm),
    starting from what the SM's threads allow; the grid size is also an argument, which
    Triton specialises on (divisible by 16 or not), so the kernel is compiled again for a
    smaller count until that binary fits it: the grid only shrinks, and never asks for
    more programs than its own binary runs at once."""
    sms = sm_count(device)
    if interpreting():   # no binary: a few programs exercise the grid-stride loops
        return min(tiles, INTERPRETED_PER_SM * sms)
    programs = min(tiles, max(1, threads_per_sm(device) // (32 * kwargs["num_warps"])) * sms)
    while True:
        fit = min(tiles, programs_per_sm(kernel.warmup(*args, programs, grid=(programs,), **kwargs)) * sms)
        if fit >= programs:
            return programs
        programs = fit


def row_launcher(kernel, cfg: dict, rows: int, device, *args, **constexprs):
    """A launcher (no arguments) of the row kernel ``kernel(*args, programs, ROWS=..., ...)``:
    one program per tile of cfg["rows"] rows, or a persistent grid of as many programs as
    fit on the GPU at once (persistent_programs) walking the tiles. Grid and keyword
    arguments are worked out here, once (bound_launch)."""
    tiles = -(-rows // cfg["rows"])
    options = {o.upper(): cfg.get(o, False) for o in SWITCHES if o.upper() in kernel.arg_names}
    hints = dict(HINTS[cfg["hints"]])
    if cfg.get("reload"):
        hints["LOAD"] = "evict_last"   # the first read leaves x in cache for the second
    # SPAN: a looped row's on-chip block, a static bound for its column loops (0: loop to cols)
    span = constexprs["BLOCK"] if cfg.get("loop_block") and constexprs["ON_CHIP"] else 0
    if cfg.get("predicated"):   # masked on the row's length though it fills the block (SMALL_BATCH_TOGGLES)
        constexprs = {**constexprs, "EVEN": False}
    if cfg.get("loop_block"):   # the column loop, even for a row that fits on chip
        constexprs = {**constexprs, "BLOCK": cfg["loop_block"], "ON_CHIP": False, "EVEN": False}
    if "SPAN" in kernel.arg_names:
        constexprs = {**constexprs, "SPAN": span}
    if "COLS" in kernel.arg_names:
        constexprs = {**constexprs, "COLS": static_cols(args[kernel.arg_names.index("cols")], constexprs["BLOCK"])}
    if "FOLD" in kernel.arg_names:
        itemsize = args[kernel.arg_names.index("x_ptr")].element_size()
        fold = fold_width(constexprs["BLOCK"], cfg["num_warps"], itemsize) if constexprs["ON_CHIP"] else 0
        constexprs = {**constexprs, "FOLD": fold}
    if "PERSISTENT" in kernel.arg_names:   # one program per tile: no loop (_triton_rows: one_tile)
        constexprs = {**constexprs, "PERSISTENT": bool(cfg["persistent"])}
    if cfg.get("maxnreg"):
        constexprs = {**constexprs, "maxnreg": cfg["maxnreg"]}   # a compile option, not a parameter
    kwargs = dict(ROWS=cfg["rows"], num_warps=cfg["num_warps"], **hints, **options, **constexprs)
    programs = persistent_programs(kernel, tiles, device, args, kwargs) if cfg["persistent"] else tiles
    launch = bound_launch(kernel, (programs,), *args, programs, **kwargs)
    launch.programs = programs   # the grid, for the tuning table (a persistent one's size is measured)
    return launch


def row_config(cfg: dict, block: int, on_chip: bool) -> dict:
    """What a row launch ran, for the record: the tuned switches and the kernel's BLOCK
    and path (a looped config walks columns in tiles of its own)."""
    if cfg.get("loop_block"):
        return {**cfg, "BLOCK": cfg["loop_block"], "on_chip": False}
    return {**cfg, "BLOCK": block, "on_chip": on_chip}


def neutral_only(a: dict, b: dict) -> bool:
    """Whether two configs differ only in BIT_NEUTRAL switches (so must give identical results)."""
    keys = (set(a) | set(b)) - set(BIT_NEUTRAL) - set(MEASURED)
    return all(a.get(k) == b.get(k) for k in keys)


def same_bits(a: dict, b: dict) -> bool:
    """Whether two candidates give identical results: measured where both wrote the
    tuning problem's output (their ``bits`` digests agree), else by their configs
    (neutral_only). Measured, because the reduction tree a row gets is Triton's layout's
    choice: a tile of two rows on 8 warps may lay each row out as one row on 4 warps
    does, or not; the outputs say which."""
    if a.get("bits") and b.get("bits"):
        return a["bits"] == b["bits"]
    return neutral_only(a, b)


def _digest(args) -> str | None:
    """A digest of the bits a candidate wrote into the tuning problem's output (the last of
    its arguments), hashed on its device, each element weighted by an odd number from its
    position: a change to any one element changes the digest. None without a tensor
    output (stand-ins)."""
    import torch
    out = args[-1] if isinstance(args, tuple) and args else None
    if not isinstance(out, torch.Tensor):
        return None
    words = out.detach().reshape(-1).view({1: torch.int8, 2: torch.int16, 4: torch.int32,
                                           8: torch.int64}[out.element_size()])
    total = torch.zeros((), dtype=torch.int64, device=out.device)
    chunk = 1 << 24   # a bounded temporary: 128 MiB of int64 at a time
    for start in range(0, words.numel(), chunk):
        w = words[start:start + chunk].to(torch.int64)
        pos = torch.arange(start, start + w.numel(), dtype=torch.int64, device=out.device)
        total += ((w + 1) * (pos * 0x9E3779B1 | 1)).sum()   # wraps modulo 2^64: still exact
    return f"{int(total) & 0xFFFFFFFFFFFFFFFF:016x}"


def _observed(launch, args, ran: bool) -> dict:
    """What a measured candidate holds beside its times: a digest of the bits its launch
    wrote into ``args``'s output (None where it did not run) and its register count
    (ptxas's, kept by bound_launch; None where not known) and grid (row_launcher's programs)."""
    return {"bits": _digest(args) if ran else None, "regs": getattr(launch, "registers", None),
            "programs": getattr(launch, "programs", None)}


def _ran(candidates: list[dict]) -> list[dict]:
    return [c for c in candidates if all(c[t] is not None for t in TIMES)]


def _eligible(candidates: list[dict], slack: float = SMALL_SLACK) -> list[dict]:
    """The candidates within ``slack`` of the fastest on the large problem."""
    ran = _ran(candidates)
    if not ran:
        raise RuntimeError(f"no Triton row config ran: {candidates}")
    fastest = min(c["us"] for c in ran)
    return [c for c in ran if c["us"] <= fastest * (1 + slack)]


def _choose(candidates: list[dict]) -> dict:
    """The large-problem candidate: among those within SMALL_SLACK of the fastest, those
    whose bits fall least short of the fastest eligible bits on the two batches below it
    (MID_ROWS and SMALL_ROWS, each with whichever config of those bits suits it: a batch
    may take it, see Tuned.for_rows; within SMALL_TIE counts as least), and of those the
    fastest on the large problem. One config's bits serve every batch.

    Both batches, not the small one alone: r95 (H200, LayerNorm fp32 4096 columns) had the
    8-warp bits fastest on the large problem (126.06 us) and on 2048 rows (18.78 against
    19.52, 3.9%), the 16-warp bits on 16 rows (5.15 against 5.28, 2.5%); choosing by 16
    rows alone kept the 16-warp bits, which ran 4096 rows in 33.3 us where the 8-warp row
    had run 32.1 (r94)."""
    ran, eligible = _ran(candidates), _eligible(candidates)

    def best(c, problem):   # the best a batch with c's bits did
        return min(d[problem] for d in ran if same_bits(c, d))
    fastest = {p: min(best(c, p) for c in eligible) for p in ("mid_us", "small_us")}

    def shortfall(c):   # the bits' worse ratio to the fastest on the two batches
        return max(best(c, p) / fastest[p] for p in fastest)
    least = min(shortfall(c) for c in eligible)
    return min((c for c in eligible if shortfall(c) <= least + SMALL_TIE), key=lambda c: c["us"])


def tune_rows(key, cols: int, block: int, on_chip: bool, dtype, device, make_scratch, bind,
              max_rows: int = 4, options: tuple[str, ...] = (), kernel=None) -> Tuned:
    """Tune a row kernel once per ``key`` (op, variant, cols) and dtype on a scratch
    problem of ~256 MiB, a MID_ROWS batch and a SMALL_ROWS batch, whatever the batch at
    hand: the choice, and so every row's bits, depend on the row length and dtype only,
    never on the number of rows (batch invariance); each batch size then takes the
    config of those bits that was fastest on the problem nearest to it (Tuned.for_rows).
    fp16 and bf16 are tuned apart: same bytes, but their conversions compile to
    different instructions and register counts, and a few registers decide how many
    programs fit on an SM (sm_90, LayerNorm two_pass at 8192 on 4 warps: bf16 128
    registers, fp16 139, four programs per SM against three; on the H200 r5 measured
    bf16's config 8% slower in fp16). ``block`` is the kernel's BLOCK (the row, or its
    column tile); ``make_scratch(rows)`` builds the arguments (the output last: its bits
    are digested, see same_bits) and ``bind(cfg, args, rows)`` returns a launcher
    (row_launcher). The choice is kept on disk for ``kernel`` on this device
    (tuning_cache): later processes take it unmeasured.

    First every tile shape (rows per tile x warps) one program per tile, without cache
    hints (and, with "looped" among the kernel's ``options``, the LOOPED_SHAPES), each
    also digesting the bits it wrote on the large problem; those within TOGGLE_SLACK of
    the fastest, and every shape that wrote the same bits as one of them, again with the
    SMALL_BATCH_SWITCHES among the options, so that a shape is chosen for what a small
    batch of its bits can do too; then the best of those without them with a persistent
    grid (and prefetching, if an option), with streaming hints, with early weights and
    with x reloaded (if options), each step from the best so far; and the fastest of
    everything measured (_choose); and for the two batches, the fastest config that
    wrote its bits."""
    key = (*key, str(dtype))
    if key in _tuned:
        return _tuned[key]
    shapes = tile_shapes(block, on_chip, max_rows, dtype.itemsize)
    switches = [o for o in options if o in SWITCHES]
    off = {**{o: False for o in switches}, **({"loop_block": 0, "maxnreg": 0} if "looped" in options else {})}
    if interpreting():
        # the most rows per tile (exercises the row masks), persistent, every switch on but
        # ORDERED, which takes the place of PREFETCH's and EARLY's loads (the forced-switch
        # CPU tests run it)
        rows, warps = max(shapes)
        return _tuned.setdefault(key, Tuned({"rows": rows, "num_warps": warps, "persistent": True,
                                             "hints": "plain", **off, **{o: o != "ordered" for o in switches}}))
    entry = _cache_entry(key, kernel, device, cols=cols, block=block, on_chip=on_chip, max_rows=max_rows,
                         options=list(options))
    _entries[key] = entry   # for_batch keeps its batches' choices beside this one
    if remembered := _remembered(key, entry):
        return remembered
    progress.phase(f"tuning Triton {_name(key)} for {cols}-column rows ({str(dtype).replace('torch.', '')})")
    large = max(1, SCRATCH_BYTES // (cols * dtype.itemsize))
    mid, small = min(MID_ROWS, large), min(SMALL_ROWS, large)
    problems = {"us": (large, make_scratch(large), TUNING_SAMPLES),
                "mid_us": (mid, make_scratch(mid), SMALL_TUNING_SAMPLES),
                "small_us": (small, make_scratch(small), SMALL_TUNING_SAMPLES)}
    candidates = []

    def measure(cfg):
        if any(config_of(c) == cfg for c in candidates):   # exactly this config (predicated is a key of its own)
            return
        launches = {name: bind(cfg, args, n) for name, (n, args, _) in problems.items()}
        times = {name: _measure(launches[name], problems[name][2]) for name in problems}
        # what its last launch on the large problem wrote (each problem has its own output)
        candidates.append({**cfg, **times, **_observed(launches["us"], problems["us"][1], times["us"] is not None)})

    for rows, warps in shapes:
        measure(dict(rows=rows, num_warps=warps, persistent=False, hints="plain", **off))
    if "looped" in options:
        for loop_block, warps in LOOPED_SHAPES:
            if cols >= 2 * loop_block:
                looped = {**off, "rows": 1, "num_warps": warps, "persistent": False, "hints": "plain",
                          "loop_block": loop_block}
                measure(looped)
                if warps == 16:
                    measure({**looped, "maxnreg": FULL_OCCUPANCY_REGS})
    # EARLY and ORDERED on a looped row that fits in SPAN: its operands loaded whole up front
    looped_switches = ("early", "ordered") if "looped_early" in options else ()

    def applicable(cfg, toggle):   # not the on-chip path's switches on a looped config (masked anyway)
        return not (cfg.get("loop_block") and any(s in toggle for s in (*SWITCHES, "predicated")
                                                  if s not in looped_switches))

    # "predicated" only where the row fills its block: a shorter one is masked already
    small_batch = [t for t in SMALL_BATCH_TOGGLES if all(s in options for s in t)
                   and ("predicated" not in t or (on_chip and block == cols))]
    eligible = _eligible(candidates, TOGGLE_SLACK)
    for c in _ran(candidates) if small_batch else ():   # each shape whose bits a large config may have
        if any(same_bits(c, e) for e in eligible):
            for toggle in small_batch:
                if applicable(c, toggle):
                    measure({**config_of(c), **toggle})

    def plain(c):   # without the small-batch switches
        return not any(c.get(s) for s in SMALL_BATCH_SWITCHES)
    # The greedy path runs on configs without the small-batch switches, which are measured
    # above for the small problem's sake: once one of them led it (early won LayerNorm
    # fp32 16384's tuning problem in r11), the path never tried a persistent prefetching
    # grid without it (r9's choice there, 94.7% of the roof against r11's 91.6%).
    path = config_of(_choose([c for c in candidates if plain(c)]))
    toggles = [{"persistent": True}]
    toggles += [{"persistent": True, "prefetch": True}] if "prefetch" in options else []
    toggles += [{"hints": "stream"}]
    toggles += [{"early": True}] if "early" in options else []
    toggles += [{"reload": True}] if "reload" in options else []
    for toggle in toggles:
        toggle = {s: v for s, v in toggle.items() if applicable(path, {s: v})}
        if toggle:
            measure({**path, **toggle})
        path = config_of(_choose([c for c in candidates if plain(c)]))
    best = _choose(candidates)
    table = {"problems": {"us": f"{large}x{cols}", "mid_us": f"{mid}x{cols}", "small_us": f"{small}x{cols}"},
             "candidates": candidates}
    if broken := _neutral_but_not_same(candidates):
        table["bit_neutral_changed_bits"] = broken   # a switch called neutral is not: say so
    del problems
    batches = [[large, None], [mid, _fastest_of_its_bits(candidates, best, "mid_us")],
               [small, _fastest_of_its_bits(candidates, best, "small_us")]]
    return _keep(key, entry, Tuned(config_of(best), table, batches))


# A batch of a few waves runs the chosen bits in the config of those bits fastest on the
# batch itself: near a wave's edge the tuning problems mislead (r35, H200, LayerNorm
# two_pass fp32 1823x781: 4x4 tiles with x read again, fastest of the chosen bits on the
# 2048-row problem, ran 1823 rows in 8.68 us; 2x4 tiles, the same bits, in 7.91, ahead of
# torch.compile's 8.40: 912 programs of 2 rows fill one wave, 1024 do not). A batch of at
# least this share of the large problem's rows, and no larger, streams from memory much as
# the large problem does: it takes that config. A larger batch is measured itself: the
# large problem's 200 samples may rank two configs a percent apart either way (r96, H200,
# LayerNorm fp32 4096 columns: looped 2048/8w plain 127.39 us against 127.54 with EARLY on
# 16384 rows, which r93's probe had run 125.61 with EARLY; 32768 rows took the plain one,
# 256.10 us, where r95's had run 250.88).
BATCH_MEASURED_BELOW = 0.5


def _takes_the_tuned_config(rows: int, problems: list[int]) -> bool:
    """A tuning problem's batch, or one from BATCH_MEASURED_BELOW of the large problem's
    rows up to the large problem's: for_batch takes the config tuned there unmeasured."""
    large = max(problems)
    return rows in problems or BATCH_MEASURED_BELOW * large <= rows <= large


def _other_grids(c: dict) -> list[dict]:
    """The grids a batch tries beside config ``c``'s: one program per tile (which prefetches
    nothing: off with it), or a persistent grid, with and without prefetching where the
    kernel has it (c has the key). r54 (H200, LayerNorm two_pass fp32 4096x4096, probe): one
    row on 16 warps ran 33.9 us per tile, 41.5 persistent, 33.5 persistent and prefetching
    (2 programs per SM: the next row's loads in flight through this row's reductions); the
    batch's own measurement (r55) then timed it 35.5 against 33.6 per tile, and kept the
    latter: measured, not assumed."""
    if c["persistent"]:
        grids = [{"persistent": False, **({"prefetch": False} if c.get("prefetch") else {})}]
        if "prefetch" in c:
            grids.append({"prefetch": not c["prefetch"]})
    else:
        grids = [{"persistent": True}]
        if "prefetch" in c:
            grids.append({"persistent": True, "prefetch": True})
    return grids


# Bit-neutral switches tried on the fastest config of a batch's family, each a list of
# alternatives: the other cache hints, the other grids.
BATCH_TOGGLES = (lambda c: [{"hints": "plain" if c["hints"] == "stream" else "stream"}], _other_grids)
_batch_choices: dict = {}
_entries: dict = {}   # tune_rows's tuning-cache entry per key (with dtype), or None


def _family(tuned: Tuned) -> list[dict]:
    """The measured candidates that wrote the chosen config's bits (same_bits), the chosen
    one first; empty without a table (the interpreter, a stand-in) or with one alone."""
    ran = _ran(tuned.table.get("candidates", []))
    chosen = next((c for c in ran if config_of(c) == tuned.config), None)
    if chosen is None:
        return []
    family = [chosen] + [c for c in ran if c is not chosen and same_bits(c, chosen)]
    return family if len(family) > 1 else []


def for_batch(tuned: Tuned, key, dtype, rows: int, make_scratch, bind) -> tuple[dict, dict]:
    """(config, tuning table) for a batch of ``rows``: a tuning problem's rows, or a batch
    from BATCH_MEASURED_BELOW of the large problem's rows up to its size, takes the config
    tuned there (Tuned.for_rows); any other batch, smaller or larger, the config of the chosen bits (_family) fastest on
    a scratch batch of its own size (make_scratch, bind as for tune_rows), then that config
    with each of the BATCH_TOGGLES, measured outside any timed region and kept on disk
    beside the tuner's choice (tuning_cache: a later process, a nightly run, takes the same
    config unmeasured, until the kernel, the tuner or the machine changes). Only a config
    that wrote the chosen config's bits there too may serve it: the bits never depend on the
    batch. The table then has that measurement under "batch"."""
    problems = [n for n, _ in tuned.batches]
    if interpreting() or not problems or _takes_the_tuned_config(rows, problems):
        return tuned.for_rows(rows), tuned.table
    family = _family(tuned)
    if not family:
        return tuned.for_rows(rows), tuned.table
    memo = (*key, str(dtype), rows)   # key and dtype: as given to tune_rows
    entry = _entries.get(memo[:-1])
    entry = entry and tuning_cache.entry_key(("batch", rows), {"tuning": entry})
    if memo not in _batch_choices and (kept := tuning_cache.load(entry) if entry else None):
        try:
            _batch_choices[memo] = (dict(kept["config"]), {**kept["batch"], "source": "cache",
                                                           "measured_at": kept["measured_at"]})
        except (KeyError, TypeError):
            pass   # kept in another form: measure
    if memo not in _batch_choices:
        progress.phase(f"tuning Triton {_name(key)}: the config of a {rows}-row batch")
        args = make_scratch(rows)
        measured = []

        def measure(cfg):
            if all(config_of(m) != cfg for m in measured):
                launch = bind(cfg, args, rows)
                us = _measure(launch, SMALL_TUNING_SAMPLES)
                measured.append({**cfg, "us": us, **_observed(launch, args, us is not None)})

        def fastest():   # of those that wrote the chosen config's bits (the one timed first)
            same = [m for m in measured if m["us"] is not None and m["bits"] == measured[0]["bits"]]
            if not same:
                raise RuntimeError(f"the chosen Triton row config did not run a batch of {rows} rows: {measured}")
            return min(same, key=lambda m: m["us"])

        for c in family:
            measure(config_of(c))
        # the tuner tried cache hints and a persistent grid on its greedy path's config only;
        # on the batch's fastest they may pay, or not: measured, each from the best so far
        for toggle in BATCH_TOGGLES:
            lead = config_of(fastest())
            for alternative in toggle(lead):
                measure({**lead, **alternative})
        best = fastest()
        config, batch = {**config_of(best), "tuned_for_rows": rows}, {"rows": rows, "candidates": measured}
        stamp = tuning_cache.store(entry, {"config": config, "batch": batch})["measured_at"] if entry else None
        _batch_choices[memo] = (config, {**batch, "source": "measured", "measured_at": stamp})
    config, batch = _batch_choices[memo]
    return config, {**tuned.table, "batch": batch}


def row_choice(key, rows: int, cols: int, block: int, on_chip: bool, dtype, device, make_scratch, bind,
               **tune_options) -> tuple[dict, dict]:
    """(config, tuning table) of a row kernel for a batch of ``rows``: tune_rows (the bits,
    once per row length and dtype), then for_batch (the batch's own config of those bits)."""
    tuned = tune_rows(key, cols, block, on_chip, dtype, device, make_scratch, bind, **tune_options)
    return for_batch(tuned, key, dtype, rows, make_scratch, bind)


def _fastest_of_its_bits(candidates: list[dict], best: dict, problem: str) -> dict | None:
    """Among the candidates that give ``best``'s bits (same_bits), the fastest on
    ``problem``; None if that is ``best`` itself."""
    family = [c for c in _ran(candidates) if same_bits(c, best)]
    config = config_of(min(family, key=lambda c: c[problem]))
    return None if config == config_of(best) else config


def _neutral_but_not_same(candidates: list[dict]) -> list[list[dict]]:
    """Pairs of candidates that differ only in BIT_NEUTRAL switches yet wrote different
    bits: a kernel whose 'neutral' switch changes its arithmetic (none should)."""
    digested = [c for c in candidates if c.get("bits")]
    return [[config_of(a), config_of(b)] for i, a in enumerate(digested) for b in digested[i + 1:]
            if neutral_only(a, b) and a["bits"] != b["bits"]]
