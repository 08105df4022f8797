"""Timing a launcher: CUDA events on a GPU, the wall clock on a CPU.

On a GPU each sample is: an L2 flush, start event, the launch, end event; samples are
queued in bursts, each burst behind one spin kernel.
- The flush *reads* a buffer twice the size of L2, so the kernel starts with a cold
  cache. A write-based flush (``buf.zero_()``) would leave L2 full of dirty lines whose
  write-back then lands inside the timed kernel and costs it bandwidth.
- The spin kernel (``torch.cuda._sleep``) keeps the GPU busy while the CPU queues the
  burst behind it, so host launch overhead does not sit between a start event and its
  kernel. What is timed is the GPU's work for one launch. The spin lasts LEAD times the
  host's measured time to queue one sample (torch.compile's guards, a Python wrapper: tens
  of us), at least MIN_SPIN_US, plus what the host falls behind the GPU over the burst
  (burst_spin_us). A sample whose start event the GPU had passed before the host finished
  queueing its launch may hold host time (the GPU idled between the start event and the
  kernel): it is counted (``late_samples``), left out, and the lead doubled. (With a fixed
  0.1 ms spin Liger's RMSNorm at 16x4096 bf16 timed at a median of 21.0 us, p90 82 us,
  where the same kernel takes 4.5-5.2.) One spin per burst rather than per sample: with
  a spin per sample the GPU spun 150-880 us for each 5-35 us kernel (H200), and the spin,
  not the kernel, set how long timing took.
Samples are taken in bursts until the spread (p90 - p10) / median is small enough, or the
median's 95% interval is narrow enough (``target_interval``, where set), or the per-case
time budget or the sample cap is reached. The median comes with a 95%
interval (``median_lo_us``..``median_hi_us``) for the run's own sampling noise. Small
cases are also timed as a CUDA graph of back-to-back launches (warm L2, no launch gaps):
``graph_us`` per launch.

A sample ends when the kernel's last instruction does, while L2 may still hold dirty lines
of its output that reach memory only later (ncu on the H200: ~26 MB of a 64 MiB
output, for our LayerNorm and Liger's alike): that write-back is charged to nobody, and a
case of ~100 MiB reads a few % faster than the memory can stream it. So a case moving at
least ``sustained_above_l2`` times the L2's size is also timed SUSTAINED: each sample is a
spin, then ``sustained_launches`` launches back to back with no flush, each paying the
write-back the one before it left (the first pays the previous sample's), on data far
larger than L2, so that nothing is read warm. ``sustained_us`` is a sample's time over its
launch count, median over ``sustained_samples`` samples: what a stream of such launches
sustains. The roof is timed the same way (roofline), and each record has both.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TimingBudget:
    warmup_ms: float = 25.0
    min_samples: int = 10
    max_samples: int = 2000
    max_seconds: float = 1.0
    target_spread: float = 0.02
    target_interval: float = 0.0      # stop once (median_hi - median_lo) / median is at most this (0: never)
    graph_below_bytes: int = 16 << 20
    graph_launches: int = 50
    sustained_above_l2: float = 0.0   # 0: never timed sustained (the sweeps' configs set 2)
    sustained_launches: int = 8
    sustained_samples: int = 10


@dataclass
class Timing:
    timer: str                  # cuda_events | wall | wall_interpreter
    median_us: float
    p10_us: float
    p90_us: float
    samples: int
    spread: float               # (p90 - p10) / median
    graph_us: float | None = None
    graph_note: str = ""
    late_samples: int = 0       # left out: the GPU may have waited on the host inside them
    spin_us: float | None = None  # the GPU's lead over the host per burst (LEAD x its time a sample), at the end
    median_lo_us: float | None = None   # the median's 95% interval (median_interval)
    median_hi_us: float | None = None
    sustained_us: float | None = None   # per launch, launches back to back (write-back charged)
    sustained_note: str = ""
    stopped_by: str = ""                # what ended the sampling: samples (their cap), seconds (the budget), spread (or the interval: narrow enough)


def _quantile(sorted_xs: list[float], q: float) -> float:
    if len(sorted_xs) == 1:
        return sorted_xs[0]
    pos = q * (len(sorted_xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def median_interval(sorted_xs: list[float]) -> tuple[float, float]:
    """A 95% confidence interval of the median that assumes nothing about the samples'
    distribution (a kernel's times are skewed and often in modes): the number of samples
    below the true median is binomial(n, 1/2), so the order statistics ranked
    n/2 -+ 1.96 sqrt(n)/2 bracket it 95% of the time (normal approximation; a handful of
    samples gives [min, max]). Samples are taken as independent: this is the run's own
    noise. Runs apart can differ by more (clocks, memory placement; docs/methodology.md)."""
    n = len(sorted_xs)
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half) - 1)      # ranks counted from 1, indices from 0
    hi = min(n - 1, math.ceil(n / 2 + half))
    return sorted_xs[lo], sorted_xs[hi]


def summarize(samples_us: list[float], timer: str) -> Timing:
    if not samples_us:
        raise RuntimeError("no timing sample was taken")
    xs = sorted(samples_us)
    med = statistics.median(xs)
    p10, p90 = _quantile(xs, 0.10), _quantile(xs, 0.90)
    lo, hi = median_interval(xs)
    return Timing(timer, med, p10, p90, len(xs), (p90 - p10) / med if med > 0 else 0.0,
                  median_lo_us=lo, median_hi_us=hi)


def _done(samples: list[float], budget: TimingBudget, started: float) -> bool:
    n = len(samples)
    if n >= budget.max_samples or time.perf_counter() - started >= budget.max_seconds:
        return True
    if n < budget.min_samples:
        return False
    t = summarize(samples, "")
    if budget.target_interval and t.median_hi_us - t.median_lo_us <= budget.target_interval * t.median_us:
        return True
    return t.spread <= budget.target_spread


def burst_spin_us(lead_us: float, host_us: float, gpu_us: float, samples: int) -> float:
    """The spin ahead of a burst of ``samples``: ``lead_us`` (LEAD times the host's time to
    queue one sample) plus what the host loses to the GPU over the burst, where it queues a
    sample (``host_us``) slower than the GPU runs one (``gpu_us``: flush and launch, 0 when
    not yet known). The GPU reaches sample i's start after spin + i·gpu_us; the host has
    queued it by (i + 1)·host_us."""
    return lead_us + (samples - 1) * max(0.0, host_us - gpu_us)


def burst_size(wanted: int, lead_us: float, host_us: float, gpu_us: float, max_spin_us: float) -> int:
    """The most samples, up to ``wanted``, whose burst_spin_us stays within ``max_spin_us``."""
    behind = max(0.0, host_us - gpu_us)
    if behind <= 0:
        return wanted
    return max(1, min(wanted, int((max_spin_us - lead_us) / behind) + 1))


class CudaTimer:
    MIN_SPIN_US = 100.0
    MAX_SPIN_US = 5000.0
    LEAD = 4.0   # spin / host time per sample: the host gains 3x its own time per sample

    FLUSHES = ("read", "write")

    def __init__(self, device: torch.device, flush: str = "read"):
        """``flush``: ``read`` (the harness's: a read of twice the L2, which dirties nothing)
        or ``write`` (nvbench's: a memset of the L2's size, whose dirty lines the timed
        kernel then writes back; for comparing with nvbench, harness.measure.nvbench)."""
        if flush not in self.FLUSHES:
            raise ValueError(f"flush={flush!r}; valid: {', '.join(self.FLUSHES)}")
        self.device = device
        l2 = torch.cuda.get_device_properties(device).L2_cache_size
        self.l2_bytes = l2
        self.flush_mode = flush
        self.flush_buf = torch.ones(max(2 * l2, 32 << 20) // 4, dtype=torch.float32, device=device)
        self.flush_out = torch.empty((), dtype=torch.float32, device=device)
        self._cycles_per_us: float | None = None

    def cycles_per_us(self) -> float:
        """torch.cuda._sleep spins for a number of GPU clock cycles: how many make a
        microsecond, measured once."""
        if self._cycles_per_us is None:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(1000)
            start.record()
            torch.cuda._sleep(2_000_000)
            end.record()
            torch.cuda.synchronize(self.device)
            self._cycles_per_us = 2_000_000 / max(start.elapsed_time(end) * 1e3, 1.0)
        return self._cycles_per_us

    def host_us(self, launch, n: int = 20) -> float:
        """The host's time to queue one sample (flush, events, launch), the GPU kept busy."""
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        torch.cuda._sleep(int(50 * n * self.cycles_per_us()))   # the queue never waits on the GPU
        t = time.perf_counter()
        for start, end in events:
            self._queue(launch, start, end)
        host = (time.perf_counter() - t) / n * 1e6
        torch.cuda.synchronize(self.device)
        return host

    def flush(self) -> None:
        if self.flush_mode == "write":
            self.flush_buf[: self.l2_bytes // 4].zero_()
            return
        torch.sum(self.flush_buf, dim=0, out=self.flush_out)   # read-only sweep: evicts, dirties nothing

    def _queue(self, launch, start, end) -> None:
        """Queue one sample: the L2 flush, then the launch between its two events (what
        host_us measures the host's time for, and what time() times)."""
        self.flush()
        start.record()
        launch()
        end.record()

    def time(self, launch, budget: TimingBudget, nbytes: int) -> Timing:
        torch.cuda.synchronize(self.device)
        t0 = time.perf_counter()
        launch()
        torch.cuda.synchronize(self.device)
        burst = 1
        while (time.perf_counter() - t0) * 1e3 < budget.warmup_ms:   # bursts: one synchronize each
            for _ in range(burst):
                launch()
            torch.cuda.synchronize(self.device)
            burst *= 2   # the last burst is at most the warm-up so far: it ends within 2x warmup_ms
        host_us = self.host_us(launch)
        spin_us = min(self.MAX_SPIN_US, max(self.MIN_SPIN_US, self.LEAD * host_us))
        started = time.perf_counter()
        samples, late, spin_us = self._samples(lambda start, end: self._queue(launch, start, end), spin_us,
                                               lambda xs: _done(xs, budget, started), host_us, budget.max_samples)
        # A launcher that synchronises (waits for its kernel) finishes every spin before it
        # returns: all its samples are late; they are what there is, and the count says so.
        stopped_by = ("samples" if len(samples) >= budget.max_samples else
                      "seconds" if time.perf_counter() - started >= budget.max_seconds else "spread")
        timing = summarize(samples if len(samples) >= budget.min_samples else samples + late, "cuda_events")
        timing.late_samples, timing.spin_us, timing.stopped_by = len(late), spin_us, stopped_by
        if nbytes < budget.graph_below_bytes:
            timing.graph_us, timing.graph_note = self._graph(launch, budget.graph_launches)
        if budget.sustained_above_l2 and nbytes >= budget.sustained_above_l2 * self.l2_bytes:
            timing.sustained_us, timing.sustained_note = self._sustained(launch, budget, spin_us)
        return timing

    def _events(self, n: int) -> list:
        """``n`` timing events, reused from burst to burst (each is read before it is recorded again)."""
        pool = self.__dict__.setdefault("_pool", [])
        while len(pool) < n:
            pool.append(torch.cuda.Event(enable_timing=True))
        return pool[:n]

    def _samples(self, queue, spin_us: float, enough, host_us: float | None = None, cap: int | None = None
                 ) -> tuple[list[float], list[float], float]:
        """Samples of ``queue(start, end)`` (which records the two events around what it
        times), in bursts, each burst behind one spin (burst_spin_us from a lead of
        ``spin_us``; ``host_us``: the host's time to queue a sample, if known, else taken as
        spin_us / LEAD), until ``enough(samples)``: (samples, late samples, the lead at the end).
        A sample whose start event the GPU had reached when the host had queued it is late:
        the GPU may have waited on the host inside it; it is kept apart and the lead doubled."""
        samples: list[float] = []
        late: list[float] = []
        batch = 5
        host_us = spin_us / self.LEAD if host_us is None else host_us   # per sample: the host's queueing
        gpu_us = 0.0                                                      # and the GPU's work, once seen
        while not enough(samples):
            # never past the budget's sample cap: a burst is queued whole before enough() is asked
            n = burst_size(batch, spin_us, host_us, gpu_us, self.MAX_SPIN_US)
            if cap is not None:
                n = max(1, min(n, cap - len(samples)))
            events = self._events(2 * n + 1)
            spun, pairs = events[0], list(zip(events[1::2], events[2::2]))
            torch.cuda._sleep(int(burst_spin_us(spin_us, host_us, gpu_us, n) * self.cycles_per_us()))
            spun.record()
            started_at = time.perf_counter()
            reached = []
            for start, end in pairs:
                queue(start, end)
                reached.append(start.query())   # the GPU got there before the launch was queued?
            queued_us = (time.perf_counter() - started_at) / n * 1e6
            torch.cuda.synchronize(self.device)
            for (start, end), was_late in zip(pairs, reached):
                (late if was_late else samples).append(start.elapsed_time(end) * 1e3)
            host_us = queued_us
            if any(reached):
                spin_us = min(self.MAX_SPIN_US, 2 * spin_us)
            else:   # the GPU never waited on the host: its time per sample is its own work
                gpu_us = spun.elapsed_time(pairs[-1][1]) * 1e3 / n
            batch = min(batch * 2, 100)
        return samples, late, spin_us

    def _sustained(self, launch, budget: TimingBudget, spin_us: float) -> tuple[float | None, str]:
        """Per-launch time of ``budget.sustained_launches`` launches back to back, no flush
        between them (the module's docstring): the median over ``budget.sustained_samples``
        samples, each behind a spin that covers the host's queueing of all its launches."""
        k, n = max(1, budget.sustained_launches), max(1, budget.sustained_samples)

        def queue(start, end):
            start.record()
            for _ in range(k):
                launch()
            end.record()
        lead = min(self.MAX_SPIN_US, spin_us * k)
        started = time.perf_counter()   # a launcher that synchronises never gives a sample in time
        samples, late, _ = self._samples(queue, lead, lambda xs: len(xs) >= n
                                         or time.perf_counter() - started >= budget.max_seconds, cap=n)
        if len(samples) < n:
            return None, (f"not timed: the host could not queue {k} launches within a {self.MAX_SPIN_US:.0f} us "
                          f"spin ({len(late)} late samples)")
        return statistics.median(samples) / k, (f"{k} launches back to back per sample, no flush: each pays "
                                                 f"the L2 write-back of the one before; median of {len(samples)}")

    def _graph(self, launch, n: int) -> tuple[float | None, str]:
        """Per-launch time of ``n`` back-to-back launches replayed as one CUDA graph."""
        try:
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                for _ in range(3):
                    launch()
            torch.cuda.current_stream(self.device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(n):
                    launch()
            graph.replay()
            torch.cuda.synchronize(self.device)
            per_launch = []
            for _ in range(10):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                graph.replay()
                end.record()
                torch.cuda.synchronize(self.device)
                per_launch.append(start.elapsed_time(end) * 1e3 / n)
            return statistics.median(per_launch), f"{n} launches per graph, L2 warm"
        except Exception as e:  # noqa: BLE001 - some launchers cannot be captured
            torch.cuda.synchronize(self.device)
            return None, f"graph capture failed: {type(e).__name__}: {str(e)[:200]}"


class WallTimer:
    """CPU: the wall clock around each launch. Labelled as such, never called a GPU time."""

    def __init__(self, interpreter: bool = False):
        self.interpreter = interpreter
        self.label = "wall_interpreter" if interpreter else "wall"

    def time(self, launch, budget: TimingBudget, nbytes: int) -> Timing:
        if self.interpreter:
            # An interpreter's time is no kernel's speed, and no rate is claimed from it: one
            # timed launch shows that the launcher runs (Numba's simulator takes 0.1-3 s a launch).
            t = time.perf_counter_ns()
            launch()
            return summarize([(time.perf_counter_ns() - t) / 1e3], self.label)
        launch()
        samples: list[float] = []
        started = time.perf_counter()
        while not _done(samples, budget, started):
            t = time.perf_counter_ns()
            launch()
            samples.append((time.perf_counter_ns() - t) / 1e3)
        return summarize(samples, self.label)


def timer_for(device: torch.device, interpreter: bool = False):
    return CudaTimer(device) if device.type == "cuda" else WallTimer(interpreter)
