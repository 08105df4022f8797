"""The row kernels' configs (rows.cuh): this GPU's table's (harness.launch.configs), else the rule.

A config is (``group``: threads per row, a power of two from 4 to 1024; ``packs``: 16-byte
packs each thread keeps in registers, 0 to read the row again from L2; ``threads``: per
block, so a block holds threads / group rows; ``trip``, a looped row's only (packs 0): the
packs a thread reads a trip, 1, 2 or 4). Only ``group`` decides a row's bits; packs, threads
and trip are bit-neutral (rows.cuh), and the tuner checks that by digest. The bits are
chosen once per (op, variant, row length, dtype), whatever the batch: batch invariance.
CuPy's raw variants run the same kernels with the same configs (choose_for, check)."""
from impls._frameworks._launch import configured

NEUTRAL = ("packs", "threads", "trip")
MAX_KEPT = 8            # packs a thread keeps in registers: 32 registers of data
MAX_LOOPED = 64         # packs a thread reads in turn when the row is read again (past it, 512 threads)
# The most threads a block may have, by packs kept: rows.cuh's max_threads, which the kernels
# are compiled for (__launch_bounds__), so that every config here launches.
MAX_THREADS = {0: 512, 1: 1024, 2: 1024, 4: 512, 8: 512}
MAX_LOOPED_GROUP = MAX_THREADS[0]
# The packs a looped row reads a thread a trip (rows.cuh's TRIP; host.cuh builds these): fewer
# hold fewer registers, so more rows are in flight on an SM; more keep more loads in flight per
# thread. Triton's fastest looped rows on the H200 at 256 MiB move 1 or 2 a thread a trip.
TRIPS = (1, 2, 4)
# The longest row, in elements (rows.cuh's MAX_ROW_ELEMENTS): its packs end within a 32-bit
# index, so no pack index or bound wraps.
MAX_COLS = 2 ** 31 - 16


def trips(per_thread: int) -> list[int]:
    """The trips worth a looped row whose threads read ``per_thread`` packs each: every trip
    up to the first that takes the thread's whole row at once (a larger one makes the same
    loads in the same single trip, holding more registers)."""
    out = []
    for trip in TRIPS:
        out.append(trip)
        if trip >= per_thread:
            break
    return out


def trip_of(config: dict) -> int:
    """The trip the kernels are given: a looped config's, 0 for a kept row (it has none)."""
    return config.get("trip", 0)


def launch_args(config: dict) -> tuple[int, int, int, int]:
    """The row kernels' launch arguments from a config, in the extension's order (group,
    threads, packs, trip: the ops' schemas in impls/<op>/<op>.cu)."""
    return config["group"], config["threads"], config["packs"], trip_of(config)


def configs(cols: int, itemsize: int, kept: bool = True, looped: bool = True) -> list[dict]:
    """Every group size that has work for most of its threads, with the row kept in registers
    where it fits (``kept``) and read again (``looped``: from 32 threads a row, where a kept row
    is the other choice). A looped row with one or two packs a thread is among them: it holds
    fewer registers than the kept one, so more rows are in flight on an SM, and its second
    read comes from L2 (Triton's fastest RMSNorm at 32768x4096 bf16 on the H200 reads its row
    so, two packs a thread on 256 threads). Each looped group comes with each trip worth it
    (trips)."""
    packs = -(-cols // (16 // itemsize))
    out = []
    group = 4
    while group <= 1024 and (group <= 4 or group // 2 < packs):
        per_thread = -(-packs // group)
        threads = max(group, 256)
        packs_kept = 1 << (per_thread - 1).bit_length()
        if kept and per_thread <= MAX_KEPT and threads <= MAX_THREADS[packs_kept]:
            out.append(dict(group=group, packs=packs_kept, threads=threads))
        if looped and group <= MAX_LOOPED_GROUP and (group >= 32 or not kept) \
                and (per_thread <= MAX_LOOPED or group == MAX_LOOPED_GROUP):
            out += [dict(group=group, packs=0, threads=threads, trip=trip) for trip in trips(per_thread)]
        group *= 2
    return out


def kernel_shapes(kept: bool = True, looped: bool = True) -> list[tuple[int, int]]:
    """Every (packs, trip) a config of ``configs`` may have, whatever the row length: the row
    kernels host.cuh builds (packs kept a power of two up to MAX_KEPT, each looped trip)."""
    held = [(1 << k, 0) for k in range(MAX_KEPT.bit_length())] if kept else []
    return held + ([(0, trip) for trip in TRIPS] if looped else [])


def unrunnable() -> tuple:
    """The error of a config that cannot launch (CUDA's 'too many resources requested for
    launch', raised by the launch check; MAX_THREADS keeps the configs here clear of it): the
    tuner skips that config."""
    import torch
    return (getattr(torch, "AcceleratorError", RuntimeError),)


def check(rows: int, cols: int, config: dict, itemsize: int, label: str) -> None:
    """host.cuh's check_rows, for a launcher that does not go through the extension: the error
    a bad batch or config gets before any launch."""
    group, threads, packs_kept = config["group"], config["threads"], config["packs"]
    if not (4 <= group <= 1024 and group & (group - 1) == 0):
        raise ValueError(f"{label}: threads per row must be a power of two from 4 to 1024, got {group}")
    if not (group <= threads <= min(1024, MAX_THREADS.get(packs_kept, 0)) and threads % group == 0
            and threads % 32 == 0):
        raise ValueError(f"{label}: {threads} threads a block do not fit a kernel keeping {packs_kept} packs "
                         f"(a multiple of 32 and of the row's {group} threads, at most "
                         f"{MAX_THREADS.get(packs_kept, 'none: packs must be 0, 1, 2, 4 or 8')})")
    if packs_kept == 0 and config.get("trip") not in TRIPS:
        raise ValueError(f"{label}: a looped row (packs 0) reads 1, 2 or 4 packs a thread a trip, "
                         f"got trip {config.get('trip')}")
    if packs_kept and config.get("trip", 0) != 0:
        raise ValueError(f"{label}: a row kept in registers ({packs_kept} packs) has no trip, "
                         f"got trip {config['trip']}")
    if not 1 <= cols <= MAX_COLS:
        raise ValueError(f"{label}: rows of {cols} elements are not supported (1 to 2^31 - 16: a row's packs end "
                         "within a 32-bit index)")
    n = 16 // itemsize
    if packs_kept and packs_kept * group < -(-cols // n):
        raise ValueError(f"{label}: {packs_kept} packs of {n} elements per thread on {group} threads hold "
                         f"{packs_kept * group * n} of a row's {cols} elements")
    if rows < 1:
        raise ValueError(f"{label}: no rows")


# Where no table holds the row length: 8 packs (128 bytes) a thread. With 4, the H200 ran Welford
# LayerNorm bf16 at 16384 columns at 0.62 and online softmax at 0.63-0.69 of the tuned config.
RULE_PACKS = 8


def rule(cols: int, itemsize: int, kept: bool = True, looped: bool = True) -> dict:
    """The config where no table holds the row length: RULE_PACKS packs a thread and at least a
    warp a row (group = the larger of min(32, packs) and packs / RULE_PACKS, a power of two),
    256 threads a block (the group's if larger); the row kept in registers where the kernel
    has that path and rows.cuh's bounds allow it; else read again on the same group (at most
    MAX_LOOPED_GROUP), 4 packs a trip where a thread reads 8 or more (two trips or more), else 1
    (a 781-column bf16 row, 4 packs a thread, ran trip 4 at 0.80-0.82 of trip 1 on the H200).
    At the recorded cases of 256 MiB or more it ran at 0.905 or better of the tuned config on
    the H200, and 0.88-0.89 at one H100 key (online softmax fp32 4096: that GPU wants 4 packs a
    thread, the H200 8; its table holds it)."""
    packs = -(-cols // (16 // itemsize))
    group = max(4, min(32, 1 << (packs - 1).bit_length()), 1 << (-(-packs // RULE_PACKS) - 1).bit_length())
    space = configs(cols, itemsize, kept, looped)
    if kept and group <= 1024:
        held = 1 << (-(-packs // group) - 1).bit_length()
        config = dict(group=group, packs=held, threads=max(group, 256))
        if config in space:
            return config
    group = min(MAX_LOOPED_GROUP, group if not kept else max(32, group))
    config = dict(group=group, packs=0, threads=max(group, 256), trip=4 if -(-packs // group) >= 8 else 1)
    return config if config in space else space[-1]


def choose_for(framework: str, title: str, unrunnable_errors: tuple, key: tuple, label: str, cols: int, dtype,
               device, rows: int, scratch, bind, kept: bool = True, looped: bool = True) -> dict:
    """The config for a batch of ``rows`` (harness.launch.configs: this GPU's table, else ``rule``),
    its source in it. ``scratch(rows)``: arguments for a batch (the output last); ``bind(config,
    args, rows)``: a launcher. ``framework`` and ``key`` (op, variant) name the kernel in the
    table (each framework's build of these kernels has entries of its own), ``title`` its
    label."""
    from harness.launch import configs as tables
    from harness.launch import rowsearch
    space = configs(cols, dtype.itemsize, kept, looped)
    if not space:
        raise ValueError(f"{title} {label}: no config holds a row of {cols} elements "
                         f"({'in registers' if not looped else 'at all'})")

    def check(config):
        if config not in space:
            raise ValueError(f"{config} is not among this kernel's configs for {cols}-column rows")

    def search_space():
        return rowsearch.RowSpace(label=f"{title} {label} for {cols}-column rows ({str(dtype).replace('torch.', '')})",
                              cols=cols, shapes=space, scratch=scratch, bind=bind, row_bytes=cols * dtype.itemsize,
                              neutral=NEUTRAL, device=device, unrunnable=unrunnable_errors)
    choice = tables.config_for(" ".join((framework, *key)), cols, dtype, rows, device,
                                rule(cols, dtype.itemsize, kept, looped), check, search_space)
    return {**choice.config, "source": choice.source}


def choose(key: tuple, label: str, cols: int, dtype, device, rows: int, scratch, bind, kept: bool = True,
           looped: bool = True) -> dict:
    """choose_for the CUDA extension's build of the row kernels."""
    return choose_for("cuda", "CUDA", unrunnable(), key, label, cols, dtype, device, rows, scratch, bind, kept, looped)


def row_launcher(key: tuple, label: str, inputs: tuple, scratch, bind, kept: bool = True, looped: bool = True):
    """The launcher of ``bind(config, inputs, rows)`` for this batch's config, the config
    (with its source) attached; ``inputs[0]`` is x, ``inputs[-1]`` the output."""
    x = inputs[0]
    rows, cols = x.shape
    config = choose(key, label, cols, x.dtype, x.device, rows, scratch, bind, kept, looped)
    return configured(bind(without_source(config), inputs, rows), config)


def without_source(config: dict) -> dict:
    return {k: v for k, v in config.items() if k != "source"}
