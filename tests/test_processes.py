"""harness.processes: a case's runs in several worker processes merged into one record."""
import statistics

import pytest

from harness.processes import merge
from harness.record import Record


def run(median, status="ok", passed=True, **extra):
    r = Record(op="rmsnorm", impl="triton", variant="-", dtype="bfloat16", shape=[16, 4096], status=status,
               passed=passed, timer="cuda_events", median_us=median, p10_us=median - 0.1, p90_us=median + 0.2,
               median_lo_us=median - 0.02, median_hi_us=median + 0.02, samples=100, spin_us=200.0,
               bytes=262144, roof_gbps=4000.0, peak_gbps=4800.0, n_distinct=1, max_ulp_spread=0,
               deterministic=True, batch_invariant=True)
    for k, v in extra.items():
        setattr(r, k, v)
    return r


def test_the_median_is_of_the_process_medians_and_the_interval_their_range():
    rec = merge([run(6.05), run(5.28), run(4.90)])
    assert rec.processes == 3 and rec.process_medians_us == [6.05, 5.28, 4.90]
    assert rec.median_us == 5.28 and (rec.median_lo_us, rec.median_hi_us) == (4.90, 6.05)
    assert rec.p10_us == pytest.approx(4.80) and rec.p90_us == pytest.approx(6.25) and rec.samples == 300
    assert rec.gbps == pytest.approx(262144 / 5.28e-6 / 1e9)   # the rates follow the merged median
    assert rec.pct_roof == pytest.approx(100 * rec.gbps / 4000) and rec.pct_peak == pytest.approx(100 * rec.gbps / 4800)
    assert rec.status == "ok" and rec.deterministic and rec.batch_invariant


def test_a_process_that_errored_or_crashed_is_the_record():
    crashed = run(5.0, status="crash", passed=None, median_us=None)
    crashed.reason = "the worker process died during this case"
    rec = merge([run(5.0), crashed, run(5.1)])
    assert rec.status == "crash" and rec.reason.startswith("in process 2 of 3: the worker process died")


def test_a_failure_in_one_process_is_not_averaged_away():
    bad = run(5.2, status="fail", passed=False, reason="1 of 6 checks failed")
    rec = merge([run(5.0), bad, run(5.1, n_distinct=2, deterministic=False)])
    assert rec.status == "fail" and rec.reason == "failed in 1 of 3 processes: 1 of 6 checks failed"
    assert rec.median_us == 5.1 and rec.n_distinct == 2 and rec.deterministic is False


def test_one_process_is_the_run_itself():
    only = run(5.0)
    assert merge([only]) is only and only.processes == 1 and only.process_medians_us == []


def test_an_interpreter_time_claims_no_bandwidth():
    rec = merge([run(900.0, timer="wall_interpreter", gbps=None, pct_roof=None),
                 run(950.0, timer="wall_interpreter", gbps=None, pct_roof=None)])
    assert rec.median_us == 925.0 and rec.gbps is None and rec.pct_roof is None


def _interrupted_runner(records_before_sigint):
    """An IsolatedRunner whose processes return ``records_before_sigint``, then meet a SIGINT."""
    import torch

    from harness.runner import Settings
    from harness.worker import IsolatedRunner
    runner = IsolatedRunner(torch.device("cpu"), Settings(), case_timeout_s=10)
    queue = list(records_before_sigint)

    def run(spec):
        if not queue:
            raise KeyboardInterrupt
        return queue.pop(0)
    runner.run, runner.stop = run, lambda kill=False: None
    return runner


@pytest.mark.parametrize("finished", [[6.05, 5.28], [4.90]])
def test_a_sigint_after_some_processes_keeps_what_they_measured(finished):
    from harness.processes import InterruptedProcesses
    runner = _interrupted_runner([run(m) for m in finished])
    with pytest.raises(InterruptedProcesses) as caught:
        runner.run_in_processes(None, 3)
    rec = caught.value.record
    assert rec.processes == len(finished) and rec.process_medians_us == finished
    assert rec.median_us == pytest.approx(statistics.median(finished))
    assert rec.status == "ok" and rec.gbps is not None
    assert rec.reason.startswith(f"interrupted (SIGINT) after {len(finished)} of 3 processes")


def test_a_sigint_in_the_first_process_leaves_nothing_to_keep():
    from harness.processes import InterruptedProcesses
    with pytest.raises(KeyboardInterrupt) as caught:
        _interrupted_runner([]).run_in_processes(None, 3)
    assert not isinstance(caught.value, InterruptedProcesses)
