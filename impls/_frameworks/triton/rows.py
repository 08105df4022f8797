"""The row kernels' configs (softmax, the norms, the chain), their rule and their launcher.
A run takes this GPU's table's config (harness.launch.configs), else the rule; what harness-tune
tries is decided here, how it chooses, and the rule that keeps a row op batch-invariant, in
harness.launch.tuner.

A config: ``rows`` per tile and ``num_warps``, a ``persistent`` grid or one program per
tile, cache ``hints``, and the kernel's own switches where it has them (the constexprs
PREFETCH, EARLY, ORDERED, the looped path ``loop_block``, ``predicated`` loads)."""
import contextvars

from harness.launch import rowsearch
from impls._frameworks.triton.launch import (HINTS, bound_launch, build_all, describe, interpreting, next_pow2,
                                             unrunnable)
from impls._frameworks.triton.occupancy import first_guess, persistent_programs

# Rows up to this many elements stay in registers (one read of x); longer rows are
# walked in tiles of ROW_TILE with a column loop (x read again from L2 or memory).
MAX_ON_CHIP = 32768
ROW_TILE = 4096
TILE_ELEMENTS = 8192        # the most elements of a tile of several rows

# RMSNorm's row kernel leaves its row count and grid (its ``rows`` and ``programs``
# parameters) unspecialised: @triton.jit(do_not_specialize=BATCH_ARGS), one binary per config
# for every batch. Triton otherwise compiles an integer parameter per class of its value (1, a
# multiple of 16, neither): a config takes a binary per class of batch among the tuner's
# problems (an odd ~256 MiB row count at 781 columns, 2048, 16), a one-row batch and the
# case's own, and the tuner's small-batch steps wait on those builds (sm_90, RMSNorm 781 bf16:
# 52 builds for 30 candidates, 33 unspecialised). Neither count takes part in an address, so
# loads keep their width and no element's arithmetic moves. Side by side on the H200 at
# 32768x4096 RMSNorm's tuned configs ran within 0.1% unspecialised. The other row kernels keep
# Triton's specialisation: LayerNorm's fp16 welford choice there (a two-row "predicated"
# tile, whose two rows' masks the compiler merges only with the count specialised, in SASS)
# ran 248 us unspecialised against 129 us; softmax and the chain until a measurement clears
# them.
BATCH_ARGS = ("rows", "programs")

# Switches that change when and how the bytes move, never which arithmetic runs on which
# elements in which order: configs that differ only in these give identical bits, so a
# batch may take its own without losing batch invariance. The tuner also compares the
# bits candidates actually write: other tile shapes can share them too.
BIT_NEUTRAL = ("persistent", "hints", "prefetch", "early", "ordered", "predicated")

# Switches a row kernel may take (``options``): tried only for kernels that have them.
# "looped" (loop_block > 0): a row that would fit on chip is walked in column tiles
# instead, kept in L2 between passes. "looped_early": the kernel's EARLY applies to such a
# looped row too (its second pass then holds the whole row, its operands loaded up front).
ROW_OPTIONS = ("prefetch", "early", "ordered", "looped")
SWITCHES = ("prefetch", "early", "ordered")   # the constexpr switches among the options

# What a batch too small to fill the GPU wants: its operands' loads out with x's, not after
# x's reduction (H200, LayerNorm 16x4096 bf16: 5.76 us plain, 5.22 with EARLY). EARLY
# loads them before the reduction, yet ptxas issues them only once x has arrived; ORDERED
# loads them, then x, as volatile loads, which it keeps in that order (slow on a large
# batch: 42.5 us against EARLY's 32.5 at 4096x4096 fp32). "predicated": EARLY on a row that
# fills its block with its loads masked all the same (bit-neutral: no element is masked);
# ptxas then issues the operands' loads with x's (H200, LayerNorm fp32 4096x4096: 32.12 us
# against 32.53 unmasked). Each is tried on its own.
SMALL_BATCH_TOGGLES = ({"early": True}, {"ordered": True}, {"early": True, "predicated": True})

# (column tile, num_warps) of looped rows. A looped row that fits on chip has a static trip
# count (SPAN): the column loop unrolls and all of a row's loads are in flight at once on
# ~30 registers, so four 16-warp programs fit an SM (torch.compile's RMSNorm runs 2048- or
# 4096-column tiles on 16 warps so, at ~100% of the H200's roof).
LOOPED_SHAPES = ((2048, 8), (2048, 16), (4096, 8), (4096, 16))

# The width an on-chip kernel with a FOLD parameter folds its rows' sums to: the narrowest
# looped column tile, so that an on-chip tile can write the bits of a looped row on as
# many warps and a batch may take either (an on-chip 4096-column fp32 row ran 4096 rows in
# 32.4 us where the 2048-column loop chosen at ~256 MiB ran them in 34.4).
ROW_FOLD = min(b for b, _ in LOOPED_SHAPES)


def row_block(cols: int) -> tuple[int, bool]:
    """(BLOCK, on_chip) for rows of ``cols`` elements."""
    if cols <= MAX_ON_CHIP:
        return next_pow2(cols), True
    return ROW_TILE, False


def tile_shapes(block: int, on_chip: bool, max_rows: int = 4, itemsize: int = 4) -> list[tuple[int, int]]:
    """(rows per tile, num_warps) to try: tiles of 1 to ``max_rows`` rows (several only
    while a tile holds at most TILE_ELEMENTS; tiles of 8 short rows never won on the H200),
    each with 8, 16 or 32 elements per thread: one to four 16-byte loads in flight per
    thread for 16-bit data, two to eight for fp32; 16-bit data also 64 (128 bytes, as
    fp32's 32): half the warps, so half the cross-warp steps of each reduction (bf16
    LayerNorm at 8192 ran 24% faster on 8 warps than on 16)."""
    shapes = []
    for rows in (1, 2, 4, 8):
        if rows > (max_rows if on_chip else 1) or (rows > 1 and rows * block > TILE_ELEMENTS):
            break
        for per_thread in sorted({8, 16, 32, 128 // itemsize}):
            warps = min(32, max(1, rows * block // (32 * per_thread)))
            if (rows, warps) not in shapes:
                shapes.append((rows, warps))
    return shapes


def static_cols(cols: int, block: int) -> int:
    """The row length a row kernel is compiled for (its COLS), or 0: compiled for any. A row
    shorter than its block (781 columns in a block of 1024) is compiled for its length:
    its masks fold register by register and the padding costs no loads, stores or mask
    tests (sm_90, the 1-warp softmax at 781 bf16: 392 instructions on 37 registers instead
    of 656 on 72; on the H200 0.97x to 1.07-1.09x Liger's). A row that fills its block, or
    is walked in column tiles, keeps the kernel compiled for any length: there the
    constant moved registers both ways (one program per SM fewer: 4.6% slower)."""
    return cols if cols < block else 0


def fold_width(block: int, num_warps: int, itemsize: int) -> int:
    """FOLD for an on-chip row of ``block`` elements on ``num_warps`` warps, or 0: no fold.
    A fold is register adds only where every thread holds both element j and j + ROW_FOLD:
    Triton lays a row out in 16-byte runs per thread, 32 lanes, the warps, repeated, so
    where that repeat divides ROW_FOLD (fp32 on 16 warps: 4 x 32 x 16 = 2048). Elsewhere it
    would move data between warps through shared memory, for bits no looped config has."""
    repeat = (16 // itemsize) * 32 * num_warps
    return ROW_FOLD if block > ROW_FOLD and ROW_FOLD % repeat == 0 else 0


def row_call(kernel, cfg: dict, rows: int, *args, **constexprs) -> tuple[dict, int]:
    """(keyword arguments, tiles) of the row kernel ``kernel(*args, programs, ...)`` for
    ``cfg``: its switches, hints and constexprs worked out from the config."""
    tiles = -(-rows // cfg["rows"])
    options = {o.upper(): cfg.get(o, False) for o in SWITCHES if o.upper() in kernel.arg_names}
    hints = HINTS[cfg["hints"]]
    # SPAN: a looped row's on-chip block, a static bound for its column loops (0: loop to cols)
    span = constexprs["BLOCK"] if cfg.get("loop_block") and constexprs["ON_CHIP"] else 0
    if cfg.get("predicated"):   # masked on the row's length though it fills the block
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
    if "PERSISTENT" in kernel.arg_names:   # one program per tile: no loop (device: one_tile)
        constexprs = {**constexprs, "PERSISTENT": bool(cfg["persistent"])}
    return dict(ROWS=cfg["rows"], num_warps=cfg["num_warps"], **hints, **options, **constexprs), tiles


# Set while the tuner asks for builds: row_launcher then notes the kernel and its call
# instead of making a launcher (precompile).
_noting = contextvars.ContextVar("noting_builds", default=None)


def row_launcher(kernel, cfg: dict, rows: int, device, *args, **constexprs):
    """A launcher (no arguments) of the row kernel ``kernel(*args, programs, ROWS=..., ...)``:
    one program per tile of cfg["rows"] rows, or a persistent grid of as many programs as
    fit on the GPU at once (persistent_programs) walking the tiles. Grid and keyword
    arguments are worked out here, once (bound_launch)."""
    kwargs, tiles = row_call(kernel, cfg, rows, *args, **constexprs)
    if (builds := _noting.get()) is not None:
        programs = first_guess(tiles, device, cfg["num_warps"]) if cfg["persistent"] else tiles
        builds.append((kernel, ((*args, programs), kwargs, (programs,))))
        return None
    programs = persistent_programs(kernel, tiles, device, args, kwargs) if cfg["persistent"] else tiles
    launch = bound_launch(kernel, (programs,), *args, programs, **kwargs)
    launch.programs = programs   # the grid, for the tuning table (a persistent one's size is measured)
    return launch


def precompile(bind):
    """The tuner's build step for a row kernel bound by ``bind``: every config's kernel, on
    each of the tuning problems given as (args, rows), built at once before any is timed
    (launch.build_all)."""
    def build(configs, problems):
        builds, noted = [], []
        token = _noting.set(noted)
        try:
            for args, rows in problems:
                for cfg in configs:
                    first = len(noted)
                    bind(cfg, args, rows)
                    builds += [(kernel, call, f"{describe(cfg)} ({rows} rows)") for kernel, call in noted[first:]]
        finally:
            _noting.reset(token)
        build_all(builds)
    return build


def row_config(cfg: dict, block: int, on_chip: bool) -> dict:
    """What a row launch ran, for the record: the tuned switches and the kernel's BLOCK
    and path (a looped config walks columns in tiles of its own)."""
    if cfg.get("loop_block"):
        return {**cfg, "BLOCK": cfg["loop_block"], "on_chip": False}
    return {**cfg, "BLOCK": block, "on_chip": on_chip}


def other_grids(c: dict) -> list[dict]:
    """The grids a batch tries beside config ``c``'s: one program per tile (which
    prefetches nothing), or a persistent grid, with and without prefetching where the
    kernel has it (c has the key). Neither is better everywhere (H200, LayerNorm fp32
    4096x4096: 33.9 us per tile, 41.5 persistent, 33.5 persistent and prefetching)."""
    if c["persistent"]:
        grids = [{"persistent": False, **({"prefetch": False} if c.get("prefetch") else {})}]
        if "prefetch" in c:
            grids.append({"prefetch": not c["prefetch"]})
    else:
        grids = [{"persistent": True}]
        if "prefetch" in c:
            grids.append({"persistent": True, "prefetch": True})
    return grids


def other_hints(c: dict) -> list[dict]:
    return [{"hints": "plain" if c["hints"] == "stream" else "stream"}]


def space(key, cols: int, block: int, on_chip: bool, dtype, device, make_scratch, bind, max_rows: int = 4,
          options: tuple[str, ...] = ()) -> rowsearch.RowSpace:
    """The configs tune_rows tries for a row kernel: every tile shape one program per tile,
    without hints (and, with "looped" among ``options``, the LOOPED_SHAPES); the small-batch
    toggles among the options; then a persistent grid (prefetching, if an option),
    streaming hints, early operands (if an option) along the greedy path."""
    shapes = tile_shapes(block, on_chip, max_rows, dtype.itemsize)
    off = switches_off(options)
    configs = [dict(rows=r, num_warps=w, persistent=False, hints="plain", **off) for r, w in shapes]
    configs += [{**off, "rows": 1, "num_warps": warps, "persistent": False, "hints": "plain", "loop_block": loop_block}
                for loop_block, warps in looped_shapes(cols, options)]
    # "predicated" only where the row fills its block: a shorter one is masked already
    small_batch = [dict(t) for t in SMALL_BATCH_TOGGLES if all(s in options for s in t)
                   and ("predicated" not in t or (on_chip and block == cols))]
    path = [{"persistent": True}]
    path += [{"persistent": True, "prefetch": True}] if "prefetch" in options else []
    path += [{"hints": "stream"}]
    path += [{"early": True}] if "early" in options else []
    # EARLY and ORDERED on a looped row that fits in SPAN: its operands loaded whole up front
    looped_switches = ("early", "ordered") if "looped_early" in options else ()

    def applicable(cfg, toggle):   # not the on-chip path's switches on a looped config (masked anyway)
        if not cfg.get("loop_block"):
            return toggle
        return {s: v for s, v in toggle.items() if s not in (*SWITCHES, "predicated") or s in looped_switches}

    name = " ".join(map(str, key[:-1]))
    label = f"Triton {name} for {cols}-column rows ({str(dtype).replace('torch.', '')})"
    return rowsearch.RowSpace(label=label, cols=cols, shapes=configs, scratch=make_scratch, bind=bind,
                          row_bytes=cols * dtype.itemsize, neutral=BIT_NEUTRAL, small_batch=small_batch, path=path,
                          batch=(other_hints, other_grids), applicable=applicable, precompile=precompile(bind),
                          unrunnable=unrunnable(), device=device)


def switches_off(options: tuple[str, ...]) -> dict:
    """A config's switches among ``options``, off: the constexpr ones and the looped path's tile."""
    return {**{o: False for o in options if o in SWITCHES}, **({"loop_block": 0} if "looped" in options else {})}


def looped_shapes(cols: int, options: tuple[str, ...]) -> list[tuple[int, int]]:
    """The LOOPED_SHAPES a row of ``cols`` may take: with "looped" among the kernel's options,
    column tiles of at most half the row (a row of one tile is the on-chip path)."""
    return [(b, w) for b, w in LOOPED_SHAPES if cols >= 2 * b] if "looped" in options else []


def interpreted_config(block: int, on_chip: bool, max_rows: int, itemsize: int, options: tuple[str, ...]) -> dict:
    """The config under the interpreter, where nothing is measured: the most rows per tile
    (exercises the row masks), persistent, every switch on but ORDERED, which takes the
    place of PREFETCH's and EARLY's loads (the forced-switch CPU tests run the others)."""
    rows, warps = max(tile_shapes(block, on_chip, max_rows, itemsize))
    return {"rows": rows, "num_warps": warps, "persistent": True, "hints": "plain", **switches_off(options),
            **{o: o != "ordered" for o in options if o in SWITCHES}}


# The rule's figures are tuned/rule time ratios on harness-tune's ~256 MiB problem (1.00: the
# rule runs as fast as the config the search chose), from the recorded H100 (2026-12-07) and
# H200 (docs/results/h200.jsonl before e0613a9) tuning tables.
# Bytes of its tile a thread holds (softmax's three-pass variant: see rule): Liger's 16 warps
# at BLOCK 16384 (64 bytes a thread in bf16) ran Welford LayerNorm bf16 at 0.64 on the H200,
# 8 warps (128 bytes) at 1.00; the 16-bit chain on chip at 8192 columns ran 0.87 on 8 warps
# (64 bytes), 0.95 on 16 (32 bytes).
BYTES_PER_THREAD = {"softmax": 64, "rmsnorm": 64, "layernorm": 128, "rmsnorm_silu_mul_add": 32}
# Rows of at most 1024 elements: rows a tile up to this many elements (Welford LayerNorm: one
# 781-column row). RMSNorm bf16 at 781 columns, one row a program, ran 0.60-0.75 on the H200.
SHORT_TILE = {"softmax": 1024, "rmsnorm": 4096, "layernorm": 4096, "rmsnorm_silu_mul_add": 2048, "welford": 1024}
# The kernels that take the looped path for a row filling a BLOCK of LOOPED_FROM or more: on
# chip on 16 warps RMSNorm bf16 16384 ran 0.75 on the H200, looped 0.97-0.99.
LOOPED_KERNELS = ("rmsnorm", "rmsnorm_silu_mul_add")
LOOPED_FROM = 4096
# A tile of at most this many elements (rows of up to 32 columns; softmax's of up to 128): a
# persistent grid, prefetching where the kernel can. One program per tile ran 1-3 columns at
# 0.04-0.24, persistent 0.90-0.91, persistent and prefetching 0.98-0.99.
TINY_TILE = 128
# Three-pass softmax reads its row three times: from rows of this many bytes it takes 16
# warps (4 warps ran 16384 bf16 at 0.65 on the H200).
THREE_PASS_WIDE = 16384


def nearest_warps(block: int, rows: int, itemsize: int, want: int) -> int:
    """The num_warps of tile_shapes' tiles of ``rows`` rows nearest ``want`` in powers of two
    (a tie: the more warps)."""
    offered = {w for r, w in tile_shapes(block, True, rows, itemsize) if r == rows}
    return min(offered, key=lambda w: (abs(w.bit_length() - want.bit_length()), -w))


def rule(op: str, variant: str, cols: int, block: int, on_chip: bool, itemsize: int,
         options: tuple[str, ...] = (), max_rows: int = 4) -> dict:
    """The config of a row kernel (``op``, ``variant``) where no table holds the row length:
    Liger's shape (BLOCK from row_block, one row a program, one program per tile, plain
    hints, every switch off) changed where the recorded tables say so (the figures at
    BYTES_PER_THREAD and below). At the recorded cases of 256 MiB or more it ran at 0.95 or
    more of the tuned config on the H100, 0.91 on the H200; Liger's rule alone, 0.80 and 0.61.
    - Rows longer than MAX_ON_CHIP (4096-column tiles): 16 warps. On the H100's 65537- and
      262147-column rows 16 warps ran 0.84-1.00, Liger's 8 warps 0.56-0.99.
    - RMSNorm and the chain on a row that fills a BLOCK of LOOPED_FROM or more: the looped
      path, 2048-column tiles on 8 warps (16-bit) or 16 (fp32), from 8192 columns 4096-column
      tiles on 16 warps (torch.compile's shape); 0.95 or more on both GPUs. Not a row shorter
      than its BLOCK: 5000 columns looped ran 0.30-0.61.
    - On-chip rows of BLOCK <= 1024: rows a tile up to SHORT_TILE elements; LayerNorm's take
      32 elements a thread.
    - Warps: the tile's bytes / (32 x BYTES_PER_THREAD), the nearest offered; three-pass
      softmax 16 from rows of THREE_PASS_WIDE bytes.
    - A tile of TINY_TILE elements or fewer: a persistent grid, prefetching where the kernel
      has PREFETCH."""
    cfg = {"rows": 1, "num_warps": 4, "persistent": False, "hints": "plain", **switches_off(options)}
    if cols > MAX_ON_CHIP:
        return {**cfg, "num_warps": nearest_warps(block, 1, itemsize, 16)}
    if op in LOOPED_KERNELS and "looped" in options and cols == block >= LOOPED_FROM:
        loop_block = 4096 if cols >= 8192 else 2048
        return {**cfg, "loop_block": loop_block, "num_warps": 16 if loop_block == 4096 or itemsize == 4 else 8}
    rows = 1
    if on_chip and block <= 1024:
        rows = max(1, min(max_rows, SHORT_TILE["welford" if variant == "welford" else op] // block))
    per_thread = 32 * itemsize if op == "layernorm" and rows > 1 else BYTES_PER_THREAD[op]
    want = rows * block * itemsize // (32 * per_thread)
    if op == "softmax" and variant == "three_pass" and cols * itemsize >= THREE_PASS_WIDE:
        want = 16
    cfg.update(rows=rows, num_warps=nearest_warps(block, rows, itemsize, max(1, want)))
    if rows * block <= TINY_TILE:
        cfg["persistent"] = True
        if "prefetch" in options:
            cfg["prefetch"] = True
    return cfg


def checker(cols: int, block: int, on_chip: bool, itemsize: int, options: tuple[str, ...], max_rows: int):
    """check(config): a ValueError naming what this row kernel cannot take in ``config`` (a
    table entry): keys other than its space's (a switch the kernel lacks, or one it no longer
    has), a tile or looped tile its space does not offer, several rows a tile on the looped
    path (which walks one row), a switch that is not a bool, unknown hints."""
    keys = {"rows", "num_warps", "persistent", "hints", *switches_off(options)}
    optional = {"predicated"} if "predicated" in options else set()
    tiles = set(tile_shapes(block, on_chip, max_rows, itemsize))
    looped = set(looped_shapes(cols, options))

    def check(config):
        if keys - set(config) or set(config) - keys - optional:
            raise ValueError(f"its keys {sorted(config)} are not this kernel's {sorted(keys)}"
                             + (" (and optionally predicated)" if optional else ""))
        if config["hints"] not in HINTS:
            raise ValueError(f"hints {config['hints']!r} is not one of {sorted(HINTS)}")
        for k in ("persistent", *SWITCHES, *optional):
            if k in config and not isinstance(config[k], bool):
                raise ValueError(f"{k}={config[k]!r} is not true or false")
        shape = (config["rows"], config["num_warps"])
        if config.get("loop_block"):
            if shape[0] != 1 or (config["loop_block"], shape[1]) not in looped:
                raise ValueError(f"the looped tile (loop_block, num_warps) = ({config['loop_block']}, {shape[1]}) "
                                 f"with {shape[0]} rows is not one of {sorted(looped)} with 1 row")
        elif shape not in tiles:
            raise ValueError(f"the tile (rows, num_warps) = {shape} is not one of {sorted(tiles)}")
    return check


def row_choice(key, rows: int, cols: int, block: int, on_chip: bool, dtype, device, make_scratch, bind,
               max_rows: int = 4, options: tuple[str, ...] = ()) -> dict:
    """The config of a row kernel for a batch of ``rows`` (harness.launch.configs: this GPU's table,
    else ``rule``), its source in it; under the interpreter, interpreted_config. ``key``
    (op, variant) names the kernel in the table; ``block`` is the kernel's BLOCK (the row, or
    its column tile); ``make_scratch(rows)`` builds arguments (the output last) and ``bind(cfg,
    args, rows)`` returns a launcher (row_launcher). fp16 and bf16 have entries apart: same
    bytes, but their conversions compile to other instructions and register counts, and a
    few registers decide how many programs fit an SM (bf16's config ran 8% slower in fp16)."""
    from harness.launch import configs
    if interpreting():
        return {**interpreted_config(block, on_chip, max_rows, dtype.itemsize, options), "source": "interpreter"}
    op, variant = key
    choice = configs.config_for(f"triton {op} {variant}", cols, dtype, rows, device,
                                rule(op, variant, cols, block, on_chip, dtype.itemsize, options, max_rows),
                                checker(cols, block, on_chip, dtype.itemsize, options, max_rows),
                                lambda: space((*key, cols, str(dtype)), cols, block, on_chip, dtype, device,
                                              make_scratch, bind, max_rows, options))
    return {**choice.config, "source": choice.source}
