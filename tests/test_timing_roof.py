"""Timing statistics, the roof's read/write interpolation, the datasheet and the roof cache."""
import ast
import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from harness.measure import roofline
from harness.measure.timing import TimingBudget, WallTimer, median_interval, summarize


def test_summary_quantiles_and_spread():
    t = summarize([float(i) for i in range(1, 102)], "wall")
    assert t.median_us == 51 and t.p10_us == 11 and t.p90_us == 91 and t.samples == 101
    assert t.spread == pytest.approx(80 / 51)
    # 101 samples: ranks 50.5 -+ 9.85, i.e. the 40th and the 62nd value (from 1)
    assert (t.median_lo_us, t.median_hi_us) == (40, 62)


def test_the_median_interval_of_a_few_samples_is_their_range():
    assert median_interval([7.0]) == (7.0, 7.0)
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0]) == (1.0, 5.0)


def test_the_median_interval_covers_the_true_median_95_percent_of_the_time():
    """Skewed samples with two modes, as kernel times come: 1000 draws of 300 samples each,
    fresh each run; the interval holds the distribution's median in 93-99% of them. Whole
    ranks make it a little wide: at 300 samples it spans ranks 133-168, which hold the
    median with probability ~96.4%; 1000 trials spread that by +-0.6% (one sd), so the
    bounds sit 4 sd and more away, while a formula a few ranks off (or 1 sd wide, ~68%)
    lands outside them."""
    gen = torch.Generator().manual_seed(int(time.time_ns()) % (1 << 31))
    n, trials = 300, 1000
    fast = 5.0 + torch.empty(trials, n).exponential_(generator=gen) * 0.4
    slow = 5.5 + torch.empty(trials, n).exponential_(generator=gen) * 0.4
    draws = torch.where(torch.rand(trials, n, generator=gen) < 0.7, fast, slow)
    big = 5.0 + torch.empty(4_000_000).exponential_(generator=gen) * 0.4
    big = torch.where(torch.rand(big.numel(), generator=gen) < 0.7, big, big + 0.5)
    true_median = big.median().item()   # the mixture's median, to ~1e-3
    covered = 0
    for row in draws.sort(dim=1).values.tolist():
        lo, hi = median_interval(row)
        covered += lo <= true_median <= hi
    assert 0.93 <= covered / trials <= 0.99, covered


def test_wall_timer_stops_on_budget_and_measures_real_time():
    budget = TimingBudget(min_samples=3, max_samples=1000, max_seconds=0.2, target_spread=0.0)
    t = WallTimer().time(lambda: time.sleep(0.01), budget, 0)
    assert 3 <= t.samples <= 25 and 9_000 < t.median_us < 40_000 and t.timer == "wall"


def test_an_interpreter_is_timed_by_one_launch_and_no_warm_up():
    """An interpreter's time claims no speed: one launch shows the launcher runs, where the
    CPU sweep's budget took a warm-up and up to 50 samples of a launch of up to seconds."""
    launches = []
    budget = TimingBudget(min_samples=5, max_samples=50, max_seconds=0.2)
    t = WallTimer(interpreter=True).time(lambda: launches.append(1), budget, 0)
    assert t.timer == "wall_interpreter" and t.samples == 1 and len(launches) == 1


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
    assert r.set_by(300, 100) == []   # no kernel named: none of a kind set it


def test_a_measured_mix_is_the_roof_of_its_mix_and_bounds_the_others():
    """Three reads per write measured (the chain's mix): the chain's roof is that kernel's,
    and a mix between it and read or copy interpolates from it, not across it."""
    r = dataclasses.replace(roof(), mix_gbps=4300, mix_kernel="stream mix", read_kernel="stream read",
                            copy_kernel="copy_")
    assert r.for_mix(300, 100) == (pytest.approx(4300), "mix w=0.25")
    assert r.set_by(300, 100) == ["mix by stream mix"]
    gbps, _ = r.for_mix(700, 100)   # f = 1/8: halfway between read and mix in time per byte
    assert gbps == pytest.approx(1 / ((1 / 4400 + 1 / 4300) / 2))
    assert r.set_by(700, 100) == ["read by stream read", "mix by stream mix"]
    assert r.set_by(100, 100) == ["copy by copy_"] and r.set_by(100, 300) == ["copy by copy_"]


def test_a_case_moving_less_than_the_roofs_buffers_takes_the_roof_of_its_size():
    """A copy of 1 GiB buffers (2 GiB moved) at 4000 GB/s, one of L2-sized 64 MiB buffers
    (128 MiB moved) at 4200: up to the L2's worth of writes stay in the L2 after one launch, so
    a case moving 128 MiB streams faster than the roof timed moving 2 GiB (RMSNorm fp32
    4096x4096 on the H100: 102.8% of it). Between the two sizes the roof follows the size
    (time per byte linear in log bytes); a kind whose near kernels ran slower keeps its roof."""
    r = dataclasses.replace(roof(), measured_bytes=1 << 30, copy_kernel="copy_", read_kernel="torch.sum",
                            near={"bytes": 64 << 20, "copy": [4200.0, "stream copy"], "read": [4300.0, "torch.sum"]})
    assert r.for_mix(64 << 20, 64 << 20) == (pytest.approx(4200), "copy")
    assert r.for_mix(16 << 20, 16 << 20) == (pytest.approx(4200), "copy")        # smaller: the near one
    assert r.for_mix(1 << 30, 1 << 30) == (pytest.approx(4000), "copy")
    half = r.for_mix(256 << 20, 256 << 20)[0]   # 512 MiB moved: halfway from 128 MiB to 2 GiB in log
    assert half == pytest.approx(1 / ((1 / 4200 + 1 / 4000) / 2))
    assert r.set_by(256 << 20, 256 << 20) == ["copy by copy_", "copy near the L2 by stream copy (64 MiB)"]
    assert r.set_by(1 << 30, 1 << 30) == ["copy by copy_"]
    assert r.for_mix(64 << 20, 0) == (pytest.approx(4400), "read")   # near read slower: the large one's
    assert r.for_mix(64 << 20, 64 << 20, sustained=True) == (None, "")   # the sustained roof: not by size


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
    # every kernel's figure is kept, and the fastest of each kind set the roof
    assert set(first.kernels) == {"torch.sum", "torch.amax", "torch.addcmul", "copy_", "fill_"}
    assert first.read_gbps == max(first.kernels[k][0] for k in ("torch.sum", "torch.amax"))
    assert first.read_kernel in ("torch.sum", "torch.amax") and first.copy_kernel == "copy_"
    assert first.mix_kernel == "torch.addcmul" and first.mix_gbps == first.kernels["torch.addcmul"][0]
    again = roofline.get(dev, timer, prov, 1 << 20, 3600, True, budget)
    assert again.source == "cache" and again.copy_gbps == first.copy_gbps
    fresh = roofline.get(dev, timer, prov, 1 << 20, 0, True, budget)   # max_age 0: stale
    assert fresh.source == "measured"


def sustained_roof():
    return dataclasses.replace(roof(), read_kernel="stream", copy_kernel="copy_", copy_sustained_gbps=3800,
                               read_sustained_gbps=4300, write_sustained_gbps=3300, mix_kernel="stream mix")


def test_the_sustained_roof_follows_the_mix_from_its_own_timings():
    r = sustained_roof()
    assert r.for_mix(100, 100, sustained=True) == (pytest.approx(3800), "copy")
    assert r.for_mix(100, 0, sustained=True) == (pytest.approx(4300), "read")
    assert r.for_mix(0, 100, sustained=True) == (pytest.approx(3300), "write")
    assert r.for_mix(100, 100) == (pytest.approx(4000), "copy")   # the plain roof is unchanged
    assert roof().for_mix(100, 100, sustained=True) == (None, "")   # a roof timed without it has none


def test_a_cached_gpu_roof_without_sustained_timings_is_measured_again(tmp_path, monkeypatch):
    """A roof kept before sustained timing (or the mix's kernels, or the kernels timed near the
    L2) existed would leave every GPU record without its sustained % of roof (or the mix's roof,
    or the roof of its size) until the cache aged out: it counts as a miss."""
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    prov, dev = {"gpu_name": "GPU", "gpu_uuid": "u", "driver": "d"}, torch.device("cuda")
    old = roof()
    (tmp_path / "roofs.json").write_text(json.dumps({roofline.device_key(dev, prov): {
        **dataclasses.asdict(old), "measured_at": time.time()}}))
    measured = []
    monkeypatch.setattr(roofline, "near_bytes", lambda device: 64 << 20)
    monkeypatch.setattr(roofline, "measure", lambda *a: measured.append(1)
                        or dataclasses.replace(sustained_roof(), measured_at=time.time(),
                                               near={"bytes": 64 << 20, "copy": [4100.0, "copy_"]}))
    got = roofline.get(dev, None, prov, 1, 3600, True, TimingBudget())
    assert measured and got.source == "measured" and got.copy_sustained_gbps == 3800
    again = roofline.get(dev, None, prov, 1, 3600, True, TimingBudget())
    assert len(measured) == 1 and again.source == "cache" and again.copy_sustained_gbps == 3800


class SustainedTimer:
    """A timer that reports a sustained time (as CudaTimer does for a large case)."""

    def time(self, launch, budget, nbytes):
        launch()
        t = summarize([10.0, 10.0, 10.0], "cuda_events")
        t.sustained_us, t.sustained_note = 12.5, "back to back"
        return t


def test_a_record_has_its_sustained_bandwidth_against_the_sustained_roof(cpu_runner, monkeypatch):
    from harness.run.runner import CaseSpec
    monkeypatch.setattr(cpu_runner, "timer", SustainedTimer())
    monkeypatch.setattr(cpu_runner, "roof", sustained_roof())
    rec = cpu_runner.run(CaseSpec("copy", "eager", "-", "float32", (1000,)))
    assert rec.status == "ok", rec.reason
    assert rec.median_us == 10.0 and rec.sustained_us == 12.5 and rec.sustained_note == "back to back"
    assert rec.sustained_gbps == pytest.approx(8000 / 12.5e-6 / 1e9)
    assert rec.sustained_roof_gbps == pytest.approx(3800)
    assert rec.pct_roof_sustained == pytest.approx(100 * rec.sustained_gbps / 3800)
    assert rec.pct_roof == pytest.approx(100 * (8000 / 10e-6 / 1e9) / 4000)


def test_triton_offers_the_roof_streaming_kernels_that_read_and_copy_every_tile_once():
    """Triton's streaming read and copy, as the roof receives them (Framework.roof_kernels,
    under the names the roof records), run under its interpreter in a process of its own
    (the kernels are compiled or interpreted as their module is imported), on a GPU of one
    SM: each shape on a grid of a few programs or of one per tile. The read's partials add
    up to the buffer's sum and the copy is exact, so no tile is skipped or read twice."""
    code = (
        "import types, torch\n"
        "torch.cuda.get_device_properties = lambda device: types.SimpleNamespace(multi_processor_count=1)\n"
        "from harness import registry\n"
        "from harness.measure import roofline\n"
        "src = torch.randint(0, 8, (8192 * 6,), generator=torch.Generator().manual_seed(3)).float()\n"
        "dst = torch.empty_like(src)\n"
        "every = {}\n"
        "reads, mixes, copies = roofline.framework_kernels({'triton': registry.frameworks()['triton']}, src, dst,\n"
        "                                                  every)\n"
        "assert not every, every\n"
        "assert list(reads) == ['stream read 4096x8w 8/SM', 'stream read 8192x16w 4/SM',\n"
        "                       'stream read 4096x8w 1/tile'], list(reads)\n"
        "assert list(mixes) == ['stream mix 1024x4w 1/tile', 'stream mix 2048x4w 1/tile'], list(mixes)\n"
        "assert list(copies) == ['stream copy 1024x4w 1/tile', 'stream copy 2048x4w 1/tile',\n"
        "                        'stream copy 4096x8w 1/tile'], list(copies)\n"
        "for name, launch in reads.items():\n"
        "    got = launch().sum().item()\n"
        "    assert got == src.sum().item(), (name, got, src.sum().item())\n"
        "q = src.numel() // 4\n"
        "for name, launch in mixes.items():\n"
        "    dst.fill_(-1)\n"
        "    launch()\n"
        "    assert torch.equal(dst[3 * q:], src[:q] + src[q:2 * q] * src[2 * q:3 * q]), name\n"
        "    assert (dst[:3 * q] == -1).all(), name\n"
        "for name, launch in copies.items():\n"
        "    dst.fill_(-1)\n"
        "    launch()\n"
        "    assert torch.equal(dst, src), name\n"
        "print('ok', len(reads), len(mixes), len(copies))\n")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parent.parent)
    assert proc.returncode == 0 and proc.stdout.startswith("ok 3 2 3"), proc.stderr[-2000:]


def test_a_roof_kernel_that_cannot_run_is_left_out_and_says_why():
    def gbps(launch):
        return launch()

    def broken():
        raise RuntimeError("no Triton build for this GPU")
    every = {}
    got = roofline.fastest({"torch.sum": lambda: (4270.0, 4260.0), "stream read": broken,
                            "stream wide": lambda: (4420.0, 4400.0)}, gbps, every)
    assert got == (4420.0, 4400.0, "stream wide")
    assert every["stream read"] == "not timed: RuntimeError: no Triton build for this GPU"
    assert every["torch.sum"] == [4270.0, 4260.0]
    with pytest.raises(RuntimeError):   # torch's own kernel is the roof's floor: its failure is the roof's
        roofline.fastest({"torch.sum": broken}, gbps, {})


class OffersRoofKernels:
    """A framework as the roof sees it: the kernels it offers, or the ImportError of a
    framework that is not installed."""

    def __init__(self, offered=None, missing=""):
        self.offered, self.missing = offered or {}, missing

    def roof_kernels(self, src, dst):
        if self.missing:
            raise ImportError(self.missing)
        return self.offered


def test_the_roof_times_every_framework_s_kernels_and_says_why_one_is_missing():
    def read():
        pass

    def copy():
        pass
    every = {}
    readers, mixers, copiers = roofline.framework_kernels(
        {"fast": OffersRoofKernels({"read": {"stream read 4096x8w": read}, "copy": {"stream copy 1024x4w": copy}}),
         "none": OffersRoofKernels(),
         "absent": OffersRoofKernels(missing="No module named 'absent'")},
        torch.ones(8), torch.empty(8), every)
    assert readers == {"stream read 4096x8w": read} and copiers == {"stream copy 1024x4w": copy} and mixers == {}
    assert every == {"absent roof kernels": "not timed: No module named 'absent'"}


@pytest.mark.parametrize("offered, message", [
    ({"read": {"torch.sum": lambda: None}}, "['torch.sum'] have names already taken"),
    ({"write": {"stream write": lambda: None}}, "kind 'write'; the kinds are read, mix and copy"),
])
def test_a_framework_s_roof_kernel_needs_a_known_kind_and_a_name_of_its_own(offered, message):
    """torch's kernels are the roof's floor and the roof names the kernel that set it: a
    framework's kernel may neither replace one of torch's nor go unnamed in a kind the roof
    does not time."""
    with pytest.raises(ValueError, match=re.escape(message)):
        roofline.framework_kernels({"clash": OffersRoofKernels(offered)}, torch.ones(8), torch.empty(8), {})


def test_no_module_under_harness_imports_a_framework():
    """harness/ knows no framework by name: a framework's packages are imported by its own
    plumbing (impls/_frameworks/) and its impls, so that adding one changes nothing here."""
    frameworks = {"triton", "liger_kernel", "cupy", "numba", "quack", "cutlass", "impls"}
    harness = Path(__file__).resolve().parent.parent / "harness"
    found = []
    for path in sorted(harness.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            found += [f"{path.relative_to(harness.parent)}:{node.lineno} imports {name}"
                      for name in names if name.split(".")[0] in frameworks]
    assert not found, "\n".join(found)


def test_no_code_under_harness_names_a_framework():
    """What sets a framework apart (its settings, the series they make) it declares itself
    (registry.Framework): no string in harness/'s code is a framework's name (cuda: a device
    type too), and its text names none whose name is no word (torch_compile) at all."""
    from harness import registry
    names = {name for name, fw in registry.frameworks().items()   # the tests' plugins are no product's
             if type(fw).__module__.startswith(registry.IMPLS_PACKAGE + ".")} - {"cuda"}
    harness = Path(__file__).resolve().parent.parent / "harness"
    found = []
    for path in sorted(harness.rglob("*.py")):
        text, where = path.read_text(), path.relative_to(harness.parent)
        found += [f"{where}:{node.lineno} names {node.value!r}" for node in ast.walk(ast.parse(text, str(path)))
                  if isinstance(node, ast.Constant) and node.value in names]
        found += [f"{where} mentions {name}" for name in sorted(names) if "_" in name and name in text]
    assert not found, "\n".join(found)


def test_a_cpu_roof_is_kept_for_the_thread_count_it_was_measured_on():
    """A CPU case runs on harness.run.runner.CPU_THREADS threads: a roof a run on more threads kept
    is another machine's roof."""
    prov = {"cpu_model": "AMD EPYC"}
    keys = {roofline.device_key(torch.device("cpu"), {**prov, "cpu_threads": n}) for n in (1, 2)}
    assert len(keys) == 2
