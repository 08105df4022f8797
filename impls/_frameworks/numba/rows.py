"""The row kernels' configs (softmax, the norms, the chain): this GPU's table's
(harness.launch.configs), else the rule.

A row belongs to a *group* of ``group`` threads (a power of two, 1 to 1024); a row is cut into
chunks of 16 bytes, ``chunk`` consecutive columns (8 of a 16-bit type, 4 of fp32: columns
chunk·k .. chunk·k + chunk - 1, counted from the row's first column), and thread j of the
group takes chunks j, j + group, ..., CHUNKS of them a step (32 values of a 16-bit type, 16
of fp32), their loads issued before any is used, taking a step's values in column order within
a chunk and chunk order within the step, adding them into one fp32 partial. A chunk moves as
one 16-byte load or store when the row starts on a 16-byte boundary and as single elements
otherwise (rowchunks.chunk_words): the same values in the same order, so a row's alignment
changes no bit. Where every operand's rows hold whole, aligned chunks (``whole``: cols a
multiple of ``chunk``, each tensor 16-byte aligned) a kernel compiled for such rows runs, a
chunk one predicated 16-byte load; otherwise one that tests each chunk. Both do the same
arithmetic in the same order. A block holds ``threads / group`` rows. So a row's bits depend
only on ``group`` and the row length (with the dtype, which fixes ``chunk``): the order each
thread adds its columns in, in fp32, and the reduction tree (groups.py);
``threads``, ``cached`` (the row kept in shared memory
as fp32 between its passes, where it fits, instead of read again), ``kept`` (one step of
the group covers the row: its values stay in registers between the passes, no cache, no
second read; where one step of the group covers the row, but for the one alternative
``configs`` offers) and ``whole`` change no bit. Each
keep (``keep``: KEPT, CACHED, READ) and ``whole`` is a kernel of its own, compiled for it.
The group is chosen once per (op, variant, row length, dtype), whatever the batch: batch
invariance.

Under the simulator nothing is timed: the group follows the row length alone (about
SIM_PER_THREAD columns a thread, at most SIM_MAX_GROUP threads), which covers every path of
the reductions on the tests' sizes: one thread a row, part of a warp, and several warps."""
from impls._frameworks._launch import configured
from impls._frameworks.numba.runtime import SIMULATED, Launch, TooManyThreads, word_views

CHUNKS = 4                    # chunks (of 16 bytes) in flight per thread per step
CHUNK_BYTES = 16              # a chunk: one 16-byte load or store
MAX_CHUNK = 8                 # columns a chunk holds at most (a 16-bit type's)
STEP_MAX = CHUNKS * MAX_CHUNK  # values a step holds at most (the kernels' local arrays)
STEP_WORDS = CHUNKS * CHUNK_BYTES // 4   # a step's 32-bit words (rowchunks.load_step)
# Where a row is held between its passes (its *keep*), each a kernel of its own (rowchunks):
# one step covers the row (kept in registers), the row cached in shared memory, or read again
# from x each pass.
KEPT, CACHED, READ = 0, 1, 2
KEEPS = {KEPT: "kept", CACHED: "cached", READ: "read"}
NEUTRAL = ("threads", "cached", "kept")
# Dynamic shared memory a block may take: the 48 KiB a block gets without opting in (Numba
# cannot opt in) covers the kernels' static arrays too (up to 512 B, the group reductions'),
# so a row cache of exactly 48 KiB would not launch; 1 KiB is kept for them.
SHARED_LIMIT = (48 << 10) - 1024
BLOCK_THREADS = 256           # threads a block, unless one row's group is larger
MIN_PER_THREAD, MAX_PER_THREAD = 4, 64
SIM_PER_THREAD, SIM_MAX_GROUP = 16, 64


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def chunk_of(itemsize: int) -> int:
    """Columns a chunk holds: 16 bytes of elements (rowchunks.width)."""
    return CHUNK_BYTES // itemsize


def cached_cols(cols: int, chunk: int) -> int:
    """The fp32 slots a row takes in the cache: whole chunks (rowchunks.cache_put)."""
    return -(-cols // chunk) * chunk


def cache_bytes(config: dict, cols: int) -> int:
    return (config["threads"] // config["group"]) * cached_cols(cols, config["chunk"]) * 4


def shape(group: int, cols: int, cacheable: bool, itemsize: int, threads: int | None = None,
          keep_in_registers: bool = True) -> dict:
    """A full config for ``group``: the block's threads (fewer rows a block when that lets the
    rows fit in shared memory), whether one step covers the row (``kept``: in registers, no
    shared memory taken; ``keep_in_registers=False`` declines it) and, if not, whether the row
    is kept in shared memory."""
    threads = threads or max(group, BLOCK_THREADS if not SIMULATED else 32)
    chunk = chunk_of(itemsize)
    config = dict(group=group, threads=threads, cached=False, chunk=chunk,
                  kept=keep_in_registers and -(-cols // chunk) <= CHUNKS * group)
    if cacheable and not config["kept"]:
        while cache_bytes(config, cols) > SHARED_LIMIT and config["threads"] > max(group, 32):
            config["threads"] //= 2
        config["cached"] = cache_bytes(config, cols) <= SHARED_LIMIT
        if not config["cached"]:
            config["threads"] = threads
    return config


def configs(cols: int, cacheable: bool, itemsize: int, keeps: tuple = tuple(KEEPS)) -> list[dict]:
    """Every group with MIN_PER_THREAD to MAX_PER_THREAD columns a thread (the ends of the range
    stretched so that short and very long rows have one), each where the variant has a kernel
    for its keep (``keeps``). A block of 1024 threads launches only
    where the kernel takes at most 64 registers a thread (Numba compiles without launch bounds;
    the 16-bit chain's cached kernel takes 71 on sm_90), so
    where 1024 is the largest group in range, 512 is a candidate too: every row length keeps
    one that launches. A group of 1024 that keeps its row in registers is one block a SM
    once its kernel takes more than 32 registers (rmsnorm fp32: 40, ptxas sm_90), so nothing
    overlaps its reduction; where it is the only group that keeps the row (rows of 8193 to
    16384 fp32 columns, 16385 to 32768 16-bit), the same group not keeping it (cached or read
    again, 32 registers: two blocks a SM) is a candidate beside it: the keep changes no bit."""
    groups = [g for g in (1 << k for k in range(11)) if MIN_PER_THREAD <= -(-cols // g) <= MAX_PER_THREAD]
    if not groups:
        groups = [1] if cols < MIN_PER_THREAD else [1024]
    if groups[-1] == 1024 and 512 not in groups:
        groups.insert(-1, 512)
    space = [shape(g, cols, cacheable, itemsize) for g in groups]
    if space[-1]["group"] == 1024 and space[-1]["kept"] and not any(c["kept"] for c in space[:-1]):
        space.append(shape(1024, cols, cacheable, itemsize, keep_in_registers=False))
    runnable = [c for c in space if keep(c) in keeps]
    return runnable or space   # none the variant can run: its launcher's refusal says why


def sim_config(cols: int, cacheable: bool, itemsize: int, keeps: tuple = tuple(KEEPS)) -> dict:
    """The simulator's config; where the variant has no kernel for its keep (softmax on_chip on
    a row too long to cache), the smallest larger group that keeps the row in registers."""
    group = min(SIM_MAX_GROUP, _pow2_at_least(-(-cols // SIM_PER_THREAD)))
    config = shape(group, cols, cacheable, itemsize)
    while keep(config) not in keeps and group < 1024:
        group *= 2
        config = shape(group, cols, cacheable, itemsize)
    return config


def shared_bytes(config: dict, cols: int) -> int:
    return cache_bytes(config, cols) if config["cached"] else 0


def keep(config: dict) -> int:
    """Where a config's rows are held between passes: KEPT, CACHED or READ (its kernel's)."""
    return KEPT if config["kept"] else CACHED if config["cached"] else READ


def check(config: dict, cols: int, itemsize: int, label: str, keeps: tuple = tuple(KEEPS)) -> None:
    """The error a config gets before its launcher is made, where its kernel would not cover
    the row or would not launch: each device kernel takes the config as given (its keep a
    constant of its code), so a kept row on a group too small for it would write only the
    part one step covers, with no error. ``keeps``: the keeps the variant has a kernel for."""
    group, threads, chunk = config["group"], config["threads"], config["chunk"]
    if not (1 <= group <= 1024 and group & (group - 1) == 0):
        raise ValueError(f"{label}: threads per row (group) must be a power of two from 1 to 1024, got {group}")
    if not (32 <= threads <= 1024 and threads % 32 == 0 and threads % group == 0):
        raise ValueError(f"{label}: {threads} threads a block: give a multiple of 32 and of the row's {group} "
                         "threads, at most 1024")
    if chunk != chunk_of(itemsize):
        raise ValueError(f"{label}: a chunk of {itemsize}-byte elements holds {chunk_of(itemsize)} columns "
                         f"(16 bytes), got chunk {chunk}")
    if config["kept"] and config["cached"]:
        raise ValueError(f"{label}: a row is kept in registers or cached in shared memory, not both: "
                         "give kept or cached False")
    steps = -(-cols // chunk)
    if config["kept"] and steps > CHUNKS * group:
        raise ValueError(f"{label}: kept needs one step of the group to cover the row, but {group} threads take "
                         f"{CHUNKS * group * chunk} of a row's {cols} columns a step; give kept=False or a group "
                         f"of at least {_pow2_at_least(-(-steps // CHUNKS))}")
    if config["cached"] and cache_bytes(config, cols) > SHARED_LIMIT:
        raise ValueError(f"{label}: {threads // group} cached rows of {cols} columns take "
                         f"{cache_bytes(config, cols)} bytes of shared memory, past the {SHARED_LIMIT} a block may "
                         "take; give fewer threads a block or cached=False")
    if keep(config) not in keeps:
        raise ValueError(f"{label} has no kernel for a row {KEEPS[keep(config)]} (it has "
                         f"{', '.join(KEEPS[k] for k in keeps)}); give a config whose row is "
                         f"{' or '.join(KEEPS[k] for k in keeps)}")


def grid(config: dict, rows: int) -> int:
    per_block = config["threads"] // config["group"]
    return max(1, -(-rows // per_block))


def launch(kernels: dict, variant: tuple, config: dict, tensors: tuple, rows: int, scalars: tuple, label: str,
           keeps: tuple = tuple(KEEPS)) -> Launch:
    """The launch of a row kernel for ``config`` on the first ``rows`` rows of ``tensors`` (x
    first, the output last), checked first (``check``): the kernel ``kernels[(*variant, whole,
    keep)]`` (its row shape and keep constants of its code), with the arguments every row
    kernel takes in this order: each tensor's (elements, words, phase), rows, cols, the op's
    ``scalars``, the group."""
    x = tensors[0]
    cols = x.shape[1]
    check(config, cols, x.element_size(), label, keeps)
    return Launch(kernels[(*variant, whole(tensors, cols), keep(config))], grid(config, rows), config["threads"],
                  (*word_views(*tensors), rows, cols, *scalars, config["group"]), shared_bytes(config, cols),
                  device=x.device)


def row_launcher(key: tuple, label: str, inputs: tuple, scratch, bind, cacheable: bool, keeps: tuple = tuple(KEEPS)):
    """The launcher of ``bind(config, inputs, rows)`` for this batch's config (harness.launch.configs:
    this GPU's table's, else ``rule``), with the config and its source attached;
    ``inputs[0]`` is x, ``inputs[-1]`` the output; ``keeps``: the keeps the variant has a
    kernel for (rows.check's)."""
    x = inputs[0]
    rows, cols = x.shape
    if cols >= 1 << 31 or cols * x.element_size() >= 1 << 32:
        raise ValueError(f"rows of {cols} columns: the Numba row kernels index within a row in 32 bits (rows of "
                         "fewer than 2^31 columns and 2^32 bytes); reshape the input into shorter rows")
    if SIMULATED:
        config = sim_config(cols, cacheable, x.element_size(), keeps)
        return configured(bind(config, inputs, rows), {**config, "whole": whole(inputs, cols), "simulated": True})
    from harness.launch import configs as tables
    from harness.launch import rowsearch
    space = configs(cols, cacheable, x.element_size(), keeps)

    def check(config):
        if config not in space:
            raise ValueError(f"{config} is not among this kernel's configs for {cols}-column rows")

    def search_space():
        return rowsearch.RowSpace(label=f"Numba {label} for {cols}-column rows ({str(x.dtype).replace('torch.', '')})",
                              cols=cols, shapes=space, scratch=scratch, bind=bind, row_bytes=cols * x.element_size(),
                              neutral=NEUTRAL, device=x.device, unrunnable=(TooManyThreads,))
    kernel = " ".join(("numba", *key))
    rule_config = rule(key, cols, x.element_size(), cacheable, keeps)
    choice = tables.config_for(kernel, cols, x.dtype, rows, x.device, rule_config, check, search_space)
    return configured(bind(choice.config, inputs, rows),
                      {**choice.config, "whole": whole(inputs, cols), "source": choice.source})


# How a kernel holds a row one step of its group does not cover (rule): online softmax and
# Welford LayerNorm run best at half the keeping group, the row cached (kept, they ran 0.49-0.82
# of the tuned config on the H200 at 4096-16384 columns); at a 1024-thread keeping group
# softmax keeps the row, the chain goes to half, RMSNorm and LayerNorm two_pass read it again.
TWO_STEP = {("softmax", "online"), ("layernorm", "welford")}
KEEPS_1024 = {("softmax", "on_chip"), ("softmax", "three_pass")}
HALVES_1024 = {("rmsnorm_silu_mul_add", "fused")}


def rule(kernel: tuple, cols: int, itemsize: int, cacheable: bool, keeps: tuple = tuple(KEEPS)) -> dict:
    """The config where no table holds the row length: the smallest group one step of which
    covers the row (kept in registers), at least min(16, chunks) threads a row (a 127-column
    row on 4 threads ran 0.33-0.60 of 16), 256 threads a block; a two-step kernel (TWO_STEP, a
    kernel without a kept path, the chain at 1024) at half that group, cached where it fits,
    else read again; a 1024-thread keeping group by ``kernel`` (op, variant): KEEPS_1024 keep
    it, the others read again on 1024 threads; rows no group keeps: 512 threads reading again
    (1024: 0.66-0.95). At the recorded cases of 256 MiB or more it ran at 0.90 or better of the
    tuned config on both GPUs."""
    chunk = chunk_of(itemsize)
    steps = -(-cols // chunk)
    group = max(1, _pow2_at_least(-(-steps // CHUNKS)), min(16, _pow2_at_least(steps)))
    if group > 1024:
        config = shape(512, cols, cacheable, itemsize, keep_in_registers=False)
    else:
        two_step = kernel in TWO_STEP or (kernel in HALVES_1024 and group == 1024) or KEPT not in keeps
        if two_step and group >= 2 and steps > CHUNKS * (group // 2) and cols <= MAX_PER_THREAD * (group // 2):
            config = shape(group // 2, cols, cacheable and CACHED in keeps, itemsize, keep_in_registers=False)
        elif group == 1024 and kernel not in KEEPS_1024:
            config = shape(1024, cols, cacheable and CACHED in keeps, itemsize, keep_in_registers=False)
        else:
            config = shape(group, cols, cacheable, itemsize)
    space = configs(cols, cacheable, itemsize, keeps)
    return config if config in space else min(space, key=lambda c: abs(c["group"] - config["group"]))


def whole(tensors, cols: int) -> bool:
    """Whether every row of every operand (row-long ones too) holds whole, aligned chunks:
    each tensor's first element 16-byte aligned (runtime.words' phase 0) and ``cols`` a
    multiple of the chunk. The kernels then take the *whole* path (rowchunks: a chunk is one
    predicated 16-byte load); otherwise the general one, which tests each chunk. Both move the
    same values in the same order: which one ran changes no bit."""
    from impls._frameworks.numba.runtime import words
    return cols % chunk_of(tensors[0].element_size()) == 0 and all(words(t, CHUNK_BYTES)[1] == 0 for t in tensors)
