"""The search behind harness-tune (harness.commands.tune): a kernel's launch config chosen by
measuring it, for any framework. A run never calls it: it reads the table harness-tune
writes (harness.launch.configs).

A *candidate* is a config: a dict of the framework's knobs (block, warps, rows per tile,
switches). The framework gives a ``bind`` that returns a launcher (no arguments) built for
one config; the tuner times launchers with the harness's own CUDA timer (cold L2, CUDA
events, harness.measure.timing), so that the config chosen is the one a run then times fastest.

Two searches:
- ``tune``: configs whose bits no check compares across configs: an elementwise kernel's
  tile (the same bits whatever the config) and a 1-D reduction's grid and block (its tree,
  so its bits, follow the config: the same wherever the table holds the config, others where
  the search takes another; docs/methodology.md, Determinism): the fastest on the real inputs.
- ``tune_rows`` (harness.launch.rowsearch): a row kernel (softmax, the norms), whose config decides each row's
  reduction tree and so its bits. Batch invariance is kept here, once for every
  framework: the bits are chosen once per row length and dtype (the key), on scratch
  problems of fixed sizes, whatever the batch at hand; a batch may then take any config
  that wrote the same bits on the tuning problem (compared by digest), never another.

``SEARCH`` decides how hard it looks (harness-tune's ``search=``): ``fast`` (the default)
times the large problem with fewer samples and the two small batches only for the
configs whose bits could be chosen; ``exhaustive`` times every candidate on every
problem with the larger budgets.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from harness.run import progress

SEARCHES = ("fast", "exhaustive")
SEARCH = SEARCHES[0]


def search() -> str:
    return SEARCH


@dataclass(frozen=True)
class Effort:
    """Samples per candidate on the ~256 MiB problem (bandwidth-bound: its spread is ~1%,
    so the median of 50 is good to a few tenths of a percent) and on the two small
    batches (latency-bound: ~5 us whose spread is ~1 us, which takes hundreds of samples
    to rank configs 0.05 us apart); ``every_problem``: time the small batches for every
    candidate, not only for the bits that ``choose`` may take (within SMALL_SLACK of the
    fastest on the large problem); ``min_spin_us``: the timer's least lead per burst (it
    doubles the lead after any late sample). ``target_interval``: a measurement stops once
    its median's 95% interval is this narrow (0: only the sample and time caps stop it).
    Timing, not building, is most of a search: a fresh fp32 8192-column RMSNorm tuning on
    the H200 spent 7.4 s in 105 measurements.

    Why 2% (the median known to about +-SMALL_TIE) for ``fast``: that is what its 300 samples
    give on 16 rows, where SMALL_TIE was set (H200 records: a 4.7 us row kernel spreads 23%
    p10-p90, its median's interval 0.68% wide at 2054 samples, so ~1.8% at 300); fewer samples
    there would rate the small batch by noise, so 16 rows keep their samples. Kernels of a few
    waves (6-35 us, 5-20% spread) reach 2% in 50-130 samples, and the ~256 MiB problem (1-2%)
    in 10; samples past that refine a median within the tie that ``choose`` reads it with."""
    large_samples: int
    small_samples: int
    large_seconds: float
    small_seconds: float
    every_problem: bool
    min_spin_us: float
    target_interval: float = 0.0


EFFORTS = {"fast": Effort(50, 300, 0.05, 0.15, False, 30.0, 0.02),
           "exhaustive": Effort(200, 1000, 0.1, 0.5, True, 100.0)}


def effort() -> Effort:
    return EFFORTS[search()]


@dataclass
class Tuned:
    """A tuner's choice and the table it chose from: every candidate tried, with its
    times on each tuning problem (empty where nothing was measured). ``batches``: [rows,
    config] per tuning problem of a row kernel, the config fastest there among those
    giving ``config``'s bits (None: ``config`` itself)."""
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
# (TIMES: ~256 MiB, MID_ROWS, SMALL_ROWS), a digest of the bits it wrote on the large one
# (None where there is no output), its register count and its grid (observed).
TIMES = ("us", "mid_us", "small_us")
MEASURED = (*TIMES, "bits", "regs", "programs")
SCRATCH_BYTES = 256 << 20   # the large problem: large enough to stream from memory
MID_ROWS = 2048             # a few waves, still latency-bound
SMALL_ROWS = 16             # a batch too small to fill the GPU
SMALL_SLACK = 0.01          # how much large-problem time buys a faster small problem
TOGGLE_SLACK = 0.03         # how close to the fastest on the large problem a config's bits must
                            # run for the small-batch toggles to be tried on it: a toggle moves
                            # a config by more than SMALL_SLACK
SMALL_TIE = 0.01            # small-problem times this close are equal: about the median's
                            # uncertainty there and 1.5 ticks of the 32 ns event clock
# A batch of at least this share of the large problem's rows, and no larger, streams from
# memory much as the large problem does and takes its config; any other batch is timed on
# a scratch batch of its own size (for_batch): near a wave's edge the tuning problems
# mislead (1823 rows in programs of 2 rows fill one wave of the H200, of 4 do not).
BATCH_MEASURED_BELOW = 0.5


def config_of(candidate: dict) -> dict:
    """A measured candidate without its measurements: the config to launch."""
    return {k: v for k, v in candidate.items() if k not in MEASURED}


_timers: dict = {}


def measure(run, samples: int, seconds: float, unrunnable: tuple = ()) -> float | None:
    """Median microseconds of ``run()`` by the harness's CUDA timer, cold L2, on a short
    budget; None for a config that does not compile or fit (``unrunnable``: the
    framework's errors for that)."""
    import torch

    from harness.measure.timing import CudaTimer, TimingBudget
    device = torch.device("cuda", torch.cuda.current_device())
    timer = _timers.get(device) or _timers.setdefault(device, CudaTimer(device))
    work = effort()
    timer.MIN_SPIN_US = work.min_spin_us
    budget = TimingBudget(warmup_ms=2, min_samples=10, max_samples=samples, max_seconds=seconds, graph_below_bytes=0,
                          target_interval=work.target_interval)
    try:
        timing = timer.time(run, budget, 1 << 30)
    except unrunnable:
        return None
    return timing.median_us


def digest(args) -> str | None:
    """A digest of the bits a launch wrote into its output (the last of ``args``), hashed
    on its device, each element weighted by an odd number from its position: a change to
    any one element changes the digest. None without a tensor output (stand-ins)."""
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


def observed(launch, args, ran: bool) -> dict:
    """What a measured candidate holds beside its times: the digest of what its launch
    wrote into ``args``'s output (None where it did not run), its register count and its
    grid where the launcher says (``registers``, ``programs`` attributes)."""
    return {"bits": digest(args) if ran else None, "regs": getattr(launch, "registers", None),
            "programs": getattr(launch, "programs", None)}


def neutral_only(a: dict, b: dict, neutral: tuple[str, ...]) -> bool:
    """Whether two configs differ only in ``neutral`` switches (so must give identical bits)."""
    keys = (set(a) | set(b)) - set(neutral) - set(MEASURED)
    return all(a.get(k) == b.get(k) for k in keys)


def same_bits(a: dict, b: dict, neutral: tuple[str, ...]) -> bool:
    """Whether two candidates give identical results: measured where both wrote the
    tuning problem's output (their ``bits`` digests agree), else by their configs
    (neutral_only). Measured, because which reduction tree a tile shape gets is the
    compiler's layout's choice, not the config's name."""
    if a.get("bits") and b.get("bits"):
        return a["bits"] == b["bits"]
    return neutral_only(a, b, neutral)


def ran(candidates: list[dict]) -> list[dict]:
    """The candidates timed on every problem."""
    return [c for c in candidates if all(c.get(t) is not None for t in TIMES)]


def eligible(candidates: list[dict], slack: float = SMALL_SLACK) -> list[dict]:
    """The candidates within ``slack`` of the fastest on the large problem."""
    timed = ran(candidates)
    if not timed:
        raise RuntimeError(f"no row config ran: {[config_of(c) for c in candidates]}")
    fastest = min(c["us"] for c in timed)
    return [c for c in timed if c["us"] <= fastest * (1 + slack)]


def choose(candidates: list[dict], neutral: tuple[str, ...]) -> dict:
    """The large-problem candidate: among those within SMALL_SLACK of the fastest, those
    whose bits fall least short of the fastest eligible bits on the two batches below it
    (each with whichever config of those bits suits it: a batch may take it, see
    Tuned.for_rows; within SMALL_TIE counts as least), and of those the fastest on the
    large problem. One config's bits serve every batch. Both batches weigh, not the small
    one alone: on the H200 the bits fastest on 16 rows of LayerNorm fp32 4096 ran 2048
    rows 3.9% slower than the bits fastest on the large problem."""
    timed, best_large = ran(candidates), eligible(candidates)

    def best(c, problem):   # the best a batch with c's bits did
        return min(d[problem] for d in timed if same_bits(c, d, neutral))
    fastest = {p: min(best(c, p) for c in best_large) for p in ("mid_us", "small_us")}

    def shortfall(c):   # the bits' worse ratio to the fastest on the two batches
        return max(best(c, p) / fastest[p] for p in fastest)
    least = min(shortfall(c) for c in best_large)
    return min((c for c in best_large if shortfall(c) <= least + SMALL_TIE), key=lambda c: c["us"])


def fastest_of_its_bits(candidates: list[dict], best: dict, problem: str, neutral: tuple[str, ...]) -> dict | None:
    """Among the candidates giving ``best``'s bits, the fastest on ``problem``; None if that
    is ``best`` itself."""
    family = [c for c in ran(candidates) if same_bits(c, best, neutral)]
    config = config_of(min(family, key=lambda c: c[problem]))
    return None if config == config_of(best) else config


def neutral_but_not_same(candidates: list[dict], neutral: tuple[str, ...]) -> list[list[dict]]:
    """Pairs of candidates that differ only in ``neutral`` switches yet wrote different
    bits: a kernel whose 'neutral' switch changes its arithmetic (none should)."""
    digested = [c for c in candidates if c.get("bits")]
    return [[config_of(a), config_of(b)] for i, a in enumerate(digested) for b in digested[i + 1:]
            if neutral_only(a, b, neutral) and a["bits"] != b["bits"]]


# --- the process's choices ---------------------------------------------------------

choices: dict = {}   # this process's choice per key


def chosen(key, tuned: Tuned) -> Tuned:
    """This process's choice for ``key`` (the first one made stays)."""
    return choices.setdefault(key, tuned)


# --- configs that change no bits -------------------------------------------------------

@dataclass
class Candidates:
    """What a framework gives the tuner for a kernel whose configs change no compared bits
    (``tune``): the configs, ``bind(config)`` giving a launcher, the errors of a config
    that cannot run, and an optional build step run before the timing."""
    label: str
    configs: list[dict]
    bind: Callable
    unrunnable: tuple = ()
    precompile: Callable | None = None


def tune(key, candidates: list[dict], bind, label: str, unrunnable: tuple = (), precompile=None) -> Tuned:
    """The fastest of ``candidates`` for ``key``, by timing the launcher ``bind(config)``
    returns; once per process. One candidate is taken unmeasured. ``precompile(configs)``,
    where given, builds them all before the timing starts (in parallel, where the framework
    can)."""
    if key in choices:
        return choices[key]
    if len(candidates) == 1:
        return chosen(key, Tuned(candidates[0]))
    started = time.perf_counter()
    progress.phase(f"tuning {label}: {len(candidates)} configs")
    if precompile:
        precompile(candidates)
    work = effort()
    rows = [{**cfg, "us": measure(bind(cfg), work.small_samples, work.small_seconds, unrunnable)} for cfg in candidates]
    timed = [r for r in rows if r["us"] is not None]
    if not timed:
        raise RuntimeError(f"no config ran for {label}: {candidates}")
    best = min(timed, key=lambda r: r["us"])
    table = {"candidates": rows, "search": search(), "seconds": round(time.perf_counter() - started, 3)}
    return chosen(key, Tuned(config_of(best), table))
