"""The row kernels' configs (softmax, the norms, the chain), chosen through harness.tuner's
row search.

A row belongs to a *group* of ``group`` threads (a power of two, 1 to 1024); a row is cut into
chunks of 4 consecutive columns (4k .. 4k+3, counted from the row's first column), and thread
j of the group takes chunks j, j + group, ..., CHUNKS of them a step, their loads issued
before any is used, taking a step's values in column order within a chunk and chunk order
within the step. A chunk moves as 8-byte words when the row is word-aligned and as single
elements otherwise (rowchunks.chunk_at): the same values in the same order, so a row's
alignment changes no bit. Where every operand's rows hold whole, word-aligned chunks
(``whole``: cols a multiple of 4, each tensor 8-byte aligned) a kernel compiled for such
rows runs, a chunk one predicated load of its words; otherwise one that tests each chunk.
Both do the same arithmetic in the same order. A block holds ``threads / group`` rows.
Only ``group`` decides a row's bits (the order each thread adds its columns in, in fp32,
and the reduction tree: device.py); ``threads``, ``cached`` (the row kept in shared memory
as fp32 between its passes, where it fits, instead of read again), ``kept`` (one step of
the group covers the row: its values stay in registers between the passes, no cache, no
second read; it follows from the group and the row length) and the row kind change no bit.
The group is chosen once per (op, variant, row length, dtype), on the tuner's scratch
problems, whatever the batch: batch invariance.

Under the simulator nothing is timed: the group follows the row length alone (about
SIM_PER_THREAD columns a thread, at most SIM_MAX_GROUP threads), which covers every path of
the reductions on the tests' sizes: one thread a row, part of a warp, and several warps."""
from harness import tuner
from impls._frameworks._launch import configured
from impls._frameworks.numba.launch import fingerprint
from impls._frameworks.numba.runtime import SIMULATED, TooManyThreads

CHUNKS = 4                    # chunks (of 4 columns) in flight per thread per step
UNROLL = 16                   # columns in flight per thread per step (the kernels' local arrays)
NEUTRAL = ("threads", "cached")
# Dynamic shared memory a block may take: the 48 KiB a block gets without opting in (Numba
# cannot opt in) covers the kernels' static arrays too (up to 512 B, the group reductions'),
# so a row cache of exactly 48 KiB would not launch; 1 KiB is kept for them.
SHARED_LIMIT = (48 << 10) - 1024
BLOCK_THREADS = 256           # threads a block, unless one row's group is larger
MIN_PER_THREAD, MAX_PER_THREAD = 4, 64
SIM_PER_THREAD, SIM_MAX_GROUP = 16, 64


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def cached_cols(cols: int) -> int:
    """The fp32 slots a row takes in the cache: whole chunks (device.cache_put)."""
    return -(-cols // 4) * 4


def cache_bytes(config: dict, cols: int) -> int:
    return (config["threads"] // config["group"]) * cached_cols(cols) * 4


def shape(group: int, cols: int, cacheable: bool, threads: int | None = None) -> dict:
    """A full config for ``group``: the block's threads (fewer rows a block when that lets the
    rows fit in shared memory), whether one step covers the row (``kept``: in registers, no
    shared memory taken) and, if not, whether the row is kept in shared memory."""
    threads = threads or max(group, BLOCK_THREADS if not SIMULATED else 32)
    config = dict(group=group, threads=threads, cached=False, kept=-(-cols // 4) <= CHUNKS * group)
    if cacheable and not config["kept"]:
        while cache_bytes(config, cols) > SHARED_LIMIT and config["threads"] > max(group, 32):
            config["threads"] //= 2
        config["cached"] = cache_bytes(config, cols) <= SHARED_LIMIT
        if not config["cached"]:
            config["threads"] = threads
    return config


def configs(cols: int, cacheable: bool) -> list[dict]:
    """Every group with MIN_PER_THREAD to MAX_PER_THREAD columns a thread (the ends of the range
    stretched so that short and very long rows have one)."""
    groups = [g for g in (1 << k for k in range(11)) if MIN_PER_THREAD <= -(-cols // g) <= MAX_PER_THREAD]
    if not groups:
        groups = [1] if cols < MIN_PER_THREAD else [1024]
    return [shape(g, cols, cacheable) for g in groups]


def sim_config(cols: int, cacheable: bool) -> dict:
    return shape(min(SIM_MAX_GROUP, _pow2_at_least(-(-cols // SIM_PER_THREAD))), cols, cacheable)


def shared_bytes(config: dict, cols: int) -> int:
    return cache_bytes(config, cols) if config["cached"] else 0


def grid(config: dict, rows: int) -> int:
    per_block = config["threads"] // config["group"]
    return max(1, -(-rows // per_block))


def row_launcher(key: tuple, label: str, inputs: tuple, scratch, bind, cacheable: bool):
    """The launcher of ``bind(config, inputs, rows)`` for this batch's config of the group
    tuned for the row length and dtype, with the config and the tuning table attached;
    ``inputs[0]`` is x, ``inputs[-1]`` the output."""
    x = inputs[0]
    rows, cols = x.shape
    if cols >= 1 << 31:
        raise ValueError(f"rows of {cols} columns: the Numba row kernels index within a row in 32 bits (rows of "
                         "fewer than 2^31 columns); reshape the input into shorter rows")
    if SIMULATED:
        config = sim_config(cols, cacheable)
        return configured(bind(config, inputs, rows), {**config, "whole": whole(inputs, cols), "simulated": True})
    space = configs(cols, cacheable)
    key = ("numba", *key, cols, str(x.dtype))
    row_space = tuner.RowSpace(label=f"Numba {label} for {cols}-column rows ({str(x.dtype).replace('torch.', '')})",
                               cols=cols, shapes=space, scratch=scratch, bind=bind, row_bytes=cols * x.element_size(),
                               neutral=NEUTRAL, fingerprint=fingerprint(space), device=x.device,
                               unrunnable=(TooManyThreads,))
    tuned = tuner.tune_rows(key, row_space)
    config, table = tuner.for_batch(tuned, key, rows, row_space)
    return configured(bind(config, inputs, rows), {**config, "whole": whole(inputs, cols)}, table)


def whole(tensors, cols: int) -> bool:
    """Whether every row of every operand (row-long ones too) holds whole, word-aligned chunks:
    each tensor's first element 8-byte aligned (runtime.words' phase 0) and ``cols`` a multiple
    of 4. The kernels then take the *whole* path (rowchunks: a chunk is one predicated load of
    its words); otherwise the general one, which tests each chunk. Both move the same values in
    the same order: which one ran changes no bit."""
    from impls._frameworks.numba.runtime import words
    return cols % 4 == 0 and all(words(t)[1] == 0 for t in tensors)
