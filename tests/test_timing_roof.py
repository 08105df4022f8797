"""Timing statistics, the roof's read/write interpolation, the datasheet and the roof cache."""
import time

import pytest
import torch

from harness import roofline
from harness.timing import TimingBudget, WallTimer, summarize


def test_summary_quantiles_and_spread():
    t = summarize([float(i) for i in range(1, 102)], "wall")
    assert t.median_us == 51 and t.p10_us == 11 and t.p90_us == 91 and t.samples == 101
    assert t.spread == pytest.approx(80 / 51)


def test_wall_timer_stops_on_budget_and_measures_real_time():
    budget = TimingBudget(min_samples=3, max_samples=1000, max_seconds=0.2, target_spread=0.0)
    t = WallTimer().time(lambda: time.sleep(0.01), budget, 0)
    assert 3 <= t.samples <= 25 and 9_000 < t.median_us < 40_000 and t.timer == "wall"
    assert WallTimer(interpreter=True).time(lambda: None, budget, 0).timer == "wall_interpreter"


def test_wall_timer_stops_early_when_the_spread_is_small():
    budget = TimingBudget(min_samples=5, max_samples=1000, max_seconds=5, target_spread=10.0)
    assert WallTimer().time(lambda: None, budget, 0).samples == 5


def roof():
    return roofline.Roof("GPU", "k", copy_gbps=4000, read_gbps=4400, write_gbps=3600,
                         measured_bytes=1, measured_at=0, timer="cuda_events")


def test_roof_follows_the_read_write_mix():
    r = roof()
    assert r.for_mix(100, 0) == (pytest.approx(4400), "read")
    assert r.for_mix(100, 100) == (pytest.approx(4000), "copy")
    assert r.for_mix(0, 100) == (pytest.approx(3600), "write")
    # three reads per write (the fused chain): halfway between read and copy in time per byte
    gbps, kind = r.for_mix(300, 100)
    assert gbps == pytest.approx(1 / ((1 / 4400 + 1 / 4000) / 2)) and kind == "mix w=0.25"


@pytest.mark.parametrize("name,gbps", [("NVIDIA H200", 4800), ("NVIDIA H100 80GB HBM3", 3350),
                                       ("NVIDIA H100 PCIe", 2000), ("NVIDIA A100-SXM4-80GB", 2039),
                                       ("NVIDIA L40S", 864), ("cpu", None)])
def test_datasheet_peaks(name, gbps):
    assert roofline.datasheet_gbps(name) == gbps


def test_roof_is_measured_then_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    budget = TimingBudget(warmup_ms=0, min_samples=3, max_samples=5, max_seconds=0.2)
    dev, prov, timer = torch.device("cpu"), {"cpu_model": "test"}, WallTimer()
    first = roofline.get(dev, timer, prov, 1 << 20, 3600, True, budget)
    assert first.source == "measured" and first.copy_gbps > 0 and first.read_gbps > 0
    again = roofline.get(dev, timer, prov, 1 << 20, 3600, True, budget)
    assert again.source == "cache" and again.copy_gbps == first.copy_gbps
    fresh = roofline.get(dev, timer, prov, 1 << 20, 0, True, budget)   # max_age 0: stale
    assert fresh.source == "measured"
