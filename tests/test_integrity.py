"""The launcher's contract (harness.measure.integrity): each planted fault that a CPU can show is
caught and labelled with what it breaks; honest impls are not flagged; the physical limit,
the clock mark and the nvbench cross-check's arithmetic."""
import pytest
import torch

import tests.plugins.faults as faults
from harness.measure import faultsuite, integrity, nvbench
from harness.measure.provenance import clock_note
from harness.records.record import Record
from harness.run.runner import CaseSpec
from harness.records.sinks import console

CPU_FAULTS = sorted(k for k, e in faults.EXPECTED.items() if not e.gpu_only)


@pytest.mark.parametrize("key", CPU_FAULTS, ids=lambda k: k[2])
def test_a_contract_breaking_launcher_is_invalid_and_says_why(cpu_runner, key):
    op, impl, variant = key
    rec = cpu_runner.run(CaseSpec(op, impl, variant, "float32", (16, 1000)))
    assert faults.EXPECTED[key].met_by(rec.as_dict()), (rec.status, rec.reason)
    assert rec.violations and rec.gbps is None and rec.median_us is None   # not timed, no bandwidth


def test_an_honest_launcher_breaks_no_contract(cpu_runner):
    rec = cpu_runner.run(CaseSpec("rmsnorm", "eager", "-", "float32", (16, 1000)))
    assert rec.status == "ok" and rec.violations == [], rec.reason


def test_inputs_compared_as_bits_so_nan_inputs_are_unchanged():
    x = torch.tensor([1.0, float("nan"), -0.0])
    before = integrity.snapshot({"x": x, "eps": 1e-6})
    assert integrity.written_inputs({"x": x, "eps": 1e-6}, before, "a launch") is None
    x[2] = 0.0   # -0.0 -> +0.0: equal as floats, not as bits
    assert "x (1 of 3 elements)" in integrity.written_inputs({"x": x}, before, "a launch")


def test_work_left_to_a_thread_is_named_whether_or_not_it_shows_in_the_output():
    """CPU: a thread the launch leaves running is its untimed work: named when it changes
    the output after the return, and when it ends after the return having changed nothing
    the look saw (it wrote the same bits again); a launcher that joins its thread, or hands
    work to a pool's worker and waits for it, is clean."""
    import concurrent.futures
    import threading
    import time
    x = torch.randn(7, 33)
    out = torch.empty_like(x)

    def leaves(write):
        def launch():
            if write == "again":
                out.copy_(x * 2)
            threading.Thread(target=lambda: (time.sleep(0.005), out.copy_(x * 2))).start()
        return launch

    assert "output elements changed" in integrity.work_after_return(leaves("late"), out)
    assert "1 thread(s) it started were still running" in integrity.work_after_return(leaves("again"), out)

    def joins():
        t = threading.Thread(target=lambda: out.copy_(x * 2))
        t.start()
        t.join()
    pool = concurrent.futures.ThreadPoolExecutor(1)   # its worker starts at the first launch and stays
    try:
        for launch in (joins, lambda: pool.submit(out.copy_, x * 2).result()):
            assert integrity.work_after_return(launch, out) is None
    finally:
        pool.shutdown()


def test_the_stream_check_needs_a_gpu():
    assert integrity.stream_check(lambda: None, torch.empty(1), torch.device("cpu")) == (None, "", False)


def test_the_physical_limit():
    l2, gib = 60 << 20, 1 << 30
    assert "physically impossible" in integrity.impossible(9000.0, gib, l2, 4800.0, 4250.0)
    assert integrity.impossible(4700.0, gib, l2, 4800.0, 4250.0) is None          # under the peak
    assert integrity.impossible(9000.0, l2 // 2, l2, 4800.0, 4250.0) is None      # fits in L2
    unknown = integrity.impossible(5400.0, gib, l2, None, 4250.0)                # no datasheet: 1.25x roof
    assert unknown and "1.25x the measured roof" in unknown
    assert integrity.impossible(5300.0, gib, l2, None, 4250.0) is None


def _timed(pct_roof, nbytes, l2=60 << 20):
    r = Record("copy", "x", "-", "float32", [1], status="ok", bytes=nbytes, gbps=pct_roof * 42.5,
               roof_gbps=4250.0, pct_roof=pct_roof, roof_source="copy", provenance={"gpu_l2_bytes": l2})
    return r


def test_the_roof_note_is_for_cases_beyond_the_l2_only():
    assert console._roof_check([_timed(140.0, 16 << 20)]) == []   # in cache: says nothing of the roof
    note = console._roof_check([_timed(104.0, 1 << 30)])
    assert note and "measure the roof again" in note[0]


def test_a_case_timed_below_normal_clocks_is_marked():
    ok = {"sm_after_mhz": 1980, "sm_max_mhz": 1980, "mem_after_mhz": 3201, "mem_max_mhz": 3201, "slowdowns": []}
    assert clock_note(ok) == ""
    assert "SM clock 1200 of 1980" in clock_note({**ok, "sm_after_mhz": 1200})
    assert "memory clock 1593 of 3201" in clock_note({**ok, "mem_after_mhz": 1593})
    assert "NVML reports thermal (hardware)" in clock_note({**ok, "slowdowns": ["thermal (hardware)"]})
    rec = Record("copy", "x", "-", "float32", [1], status="ok", clock_note=clock_note({**ok, "sm_after_mhz": 900}))
    assert any(line.startswith("clocks: 1 case(s)") for line in console._summary([rec]))


def test_the_fault_suite_reports_its_rates(capsys):
    """The command a user runs: every CPU fault caught, eager not flagged, exit 0."""
    assert faultsuite.main(["--device", "cpu", "--honest", "eager", "--case-timeout", "10"]) == 0
    out = capsys.readouterr().out
    assert f"detection rate 100% of {len(CPU_FAULTS) + 7} planted faults" in out, out
    assert "false-alarm rate 0% of 1 honest impls" in out, out


@pytest.mark.parametrize("shape", ["64by1000", "64x0", "4096"])
def test_a_bad_fault_suite_shape_is_exit_2_naming_it(capsys, shape):
    assert faultsuite.main(["--device", "cpu", "--shape", shape]) == 2
    assert capsys.readouterr().err.startswith(f"harness-faults: error: --shape {shape!r}")


def test_a_missed_fault_and_a_false_alarm_count_against_the_rates():
    rows = [faultsuite.Row("a", "fault", "invalid", "ok", "", False), faultsuite.Row("b", "fault", "x", "x", "", True),
            faultsuite.Row("c", "honest", "ok", "invalid", "why", False)]
    assert faultsuite.rates(rows) == (0.5, 1.0)
    assert "MISSED" in faultsuite.render(rows) and "FLAGGED" in faultsuite.render(rows)


def test_nvbench_rows_agree_when_the_same_flush_lands_within_two_percent():
    row = {"op": "rmsnorm", "impl": "eager", "variant": "-", "dtype": "bfloat16", "shape": [32768, 4096],
           "bytes": 1 << 29, "harness_median_us": 154.24, "harness_nvbench_flush_median_us": 157.92,
           "nvbench_cold_median_us": 157.95}
    nvbench.finish(row)
    assert row["agrees"] is True and row["harness_vs_nvbench_pct"] == pytest.approx(-2.35, abs=0.01)
    bad = {**row, "harness_nvbench_flush_median_us": 170.0}
    nvbench.finish(bad)
    assert bad["agrees"] is False
    assert "1 of 2 cases agree" in nvbench.render([row, bad])


def test_nvbench_check_plans_the_large_cases_and_says_what_it_needs():
    _cfg, cases = nvbench.plan_cases(["op=rmsnorm", "impl=eager", "sweep=default", "dtype=bf16"],
                                     torch.device("cpu"), nvbench.MIN_BYTES)
    assert sorted(tuple(c[0].shape) for c in cases) == [(8192, 16384), (16384, 8192), (32768, 4096)]
    assert nvbench.main(["op=rmsnorm", "min_bytes=lots"]) == 2
