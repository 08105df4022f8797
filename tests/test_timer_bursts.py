"""The CUDA timer's bursts, on a simulated GPU (no GPU needed): a queue that runs each
operation when the host has queued it and the GPU is free, events that take the GPU's time
when they are reached, and a host clock that each call advances. What must hold: a kept
sample is the kernel's own time (never host time), a sample the GPU reached before its
launch was queued is left out and counted, and timing costs about the host's time per
sample, not a spin per sample."""
from types import SimpleNamespace

import pytest
import torch

from harness.measure import timing
from harness.measure.timing import CudaTimer, TimingBudget, burst_size, burst_spin_us


class SimGpu:
    """One stream. ``host_us``: what each queueing call costs the host; ``stall``: host
    microseconds added to the n-th launch call (a hiccup: GC, another thread)."""

    def __init__(self, kernel_us: float, flush_us: float, host_us: float, launch_host_us: float,
                 stall: tuple[int, float] | None = None):
        self.kernel_us, self.flush_us = kernel_us, flush_us
        self.host_us, self.launch_host_us = host_us, launch_host_us
        self.stall = stall
        self.t_host = 0.0
        self.gpu_free = 0.0
        self.launches = 0
        self.syncs = 0

    def _run(self, duration: float, host_cost: float) -> tuple[float, float]:
        self.t_host += host_cost
        start = max(self.t_host, self.gpu_free)
        self.gpu_free = start + duration
        return start, self.gpu_free

    def sleep(self, cycles: int) -> None:
        self._run(cycles / 1.0, self.host_us)   # 1 cycle per us

    def flush(self) -> None:
        self._run(self.flush_us, self.host_us)

    def launch(self) -> None:
        self.launches += 1
        cost = self.launch_host_us
        if self.stall and self.launches == self.stall[0]:
            cost += self.stall[1]
        self._run(self.kernel_us, cost)

    def synchronize(self, *_) -> None:
        self.syncs += 1
        self.t_host = max(self.t_host, self.gpu_free)

    def event(self, **_):
        sim = self

        class Event:
            at = None

            def record(self):
                self.at, _ = sim._run(0.0, sim.host_us)

            def query(self):
                sim.t_host += 1.0
                return self.at <= sim.t_host

            def elapsed_time(self, other):
                return (other.at - self.at) / 1e3   # ms
        return Event()


@pytest.fixture
def sim_timer(monkeypatch):
    def make(**kw):
        sim = SimGpu(**kw)
        monkeypatch.setattr(torch.cuda, "Event", sim.event)
        monkeypatch.setattr(torch.cuda, "_sleep", sim.sleep)
        monkeypatch.setattr(torch.cuda, "synchronize", sim.synchronize)
        monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=lambda: sim.t_host / 1e6))
        timer = CudaTimer.__new__(CudaTimer)
        timer.device, timer.l2_bytes, timer.flush_mode, timer._cycles_per_us = None, 1 << 20, "read", 1.0
        timer.flush = sim.flush
        return sim, timer
    return make


BUDGET = TimingBudget(warmup_ms=2, min_samples=10, max_samples=300, max_seconds=10.0, target_spread=-1.0,
                      graph_below_bytes=0)


def test_a_host_faster_than_the_gpu_gives_every_sample_clean_and_the_kernel_s_own_time(sim_timer):
    sim, timer = sim_timer(kernel_us=50.0, flush_us=30.0, host_us=2.0, launch_host_us=10.0)
    began = sim.t_host
    t = timer.time(sim.launch, BUDGET, 1 << 30)
    assert t.samples >= 300 and t.late_samples == 0
    assert t.median_us == t.p10_us == t.p90_us == pytest.approx(50.0)
    # one spin per burst: the GPU's time per sample is its own work (flush + kernel), not a spin
    assert (sim.t_host - began) / t.samples < 1.5 * (50 + 30)


def test_a_host_slower_than_the_gpu_keeps_no_host_time_and_costs_about_its_own_time(sim_timer):
    sim, timer = sim_timer(kernel_us=5.0, flush_us=20.0, host_us=5.0, launch_host_us=45.0)
    began = sim.t_host
    t = timer.time(sim.launch, BUDGET, 1 << 20)
    assert t.samples >= 300
    assert t.median_us == t.p90_us == pytest.approx(5.0)   # the kernel alone: nothing the host did
    host_per_sample = 3 * 5.0 + 45.0 + 1.0                  # flush, two events, launch, query
    assert (sim.t_host - began) / (t.samples + t.late_samples) < 2 * host_per_sample   # a spin per sample: 5x


def test_a_host_stall_inside_a_burst_is_left_out_counted_and_the_lead_doubled(sim_timer):
    sim, timer = sim_timer(kernel_us=5.0, flush_us=20.0, host_us=5.0, launch_host_us=45.0, stall=(200, 20000.0))
    t = timer.time(sim.launch, BUDGET, 1 << 20)
    assert t.late_samples >= 1
    assert t.p90_us == pytest.approx(5.0)   # the stall is in no kept sample
    assert t.spin_us >= 2 * timer.MIN_SPIN_US


def test_a_launcher_that_synchronises_has_every_sample_late_and_says_so(sim_timer):
    sim, timer = sim_timer(kernel_us=5.0, flush_us=20.0, host_us=5.0, launch_host_us=10.0)

    def waits():
        sim.launch()
        sim.synchronize()
    t = timer.time(waits, TimingBudget(warmup_ms=1, min_samples=10, max_samples=40, max_seconds=0.5,
                                       graph_below_bytes=0), 1 << 20)
    assert t.samples >= 1 and t.late_samples == t.samples   # used, with the count saying what they are


def test_the_warm_up_synchronizes_once_per_burst_not_per_launch(sim_timer):
    sim, timer = sim_timer(kernel_us=2.0, flush_us=20.0, host_us=2.0, launch_host_us=3.0)
    timer.time(sim.launch, TimingBudget(warmup_ms=20, min_samples=10, max_samples=10, graph_below_bytes=0), 1 << 20)
    assert sim.syncs < 20   # 20 ms of 5 us launches: ~4000 synchronizations one launch at a time


def test_the_burst_spin_covers_what_the_host_loses_over_the_burst():
    assert burst_spin_us(100.0, 50.0, 80.0, 20) == 100.0          # the GPU is the slower: the lead alone
    assert burst_spin_us(100.0, 50.0, 20.0, 11) == 100.0 + 10 * 30.0
    assert burst_size(100, 100.0, 50.0, 80.0, 5000.0) == 100
    n = burst_size(100, 100.0, 50.0, 20.0, 1000.0)
    assert burst_spin_us(100.0, 50.0, 20.0, n) <= 1000.0 < burst_spin_us(100.0, 50.0, 20.0, n + 1)
    assert burst_size(100, 5000.0, 500.0, 0.0, 5000.0) == 1        # at least one sample a burst


def test_sampling_stops_when_the_median_s_interval_is_narrow_enough():
    budget = TimingBudget(min_samples=10, max_samples=1000, max_seconds=100.0, target_spread=0.0, target_interval=0.02)
    wide = [5.0 + (i % 7) * 0.4 for i in range(60)]        # 2.4 us of spread on 5 us: interval wider than 2%
    assert not timing._done(wide, budget, timing.time.perf_counter())
    ticks = [4.672] * 40 + [4.704] * 10 + [5.5] * 10        # the middle ranks on one 32 ns tick
    assert timing._done(ticks, budget, timing.time.perf_counter())
    off = TimingBudget(min_samples=10, max_samples=1000, max_seconds=100.0, target_spread=0.0)
    assert not timing._done(ticks, off, timing.time.perf_counter())


def test_a_burst_never_takes_more_samples_than_the_budget_allows(sim_timer):
    sim, timer = sim_timer(kernel_us=50.0, flush_us=30.0, host_us=2.0, launch_host_us=10.0)
    t = timer.time(sim.launch, TimingBudget(warmup_ms=2, min_samples=10, max_samples=12, max_seconds=10.0,
                                            target_spread=-1.0, graph_below_bytes=0), 1 << 30)
    assert t.samples + t.late_samples == 12   # bursts of 5 then 7 (the rest of the cap), not 5 + 10
