"""harness.run.processes: a case's runs in several worker processes merged into one record."""
import statistics

import pytest

from harness.run.processes import InterruptedProcesses, merge, partial, rounds, run_cell
from harness.records.record import Record


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


def _cut_after(medians):
    """A run_fresh whose processes measure ``medians`` in turn, then meet a SIGINT."""
    queue = list(medians)

    def run_fresh(spec):
        if not queue:
            raise KeyboardInterrupt
        return run(queue.pop(0), impl=spec)
    return run_fresh


@pytest.mark.parametrize("finished", [[6.05, 5.28], [4.90]])
def test_a_sigint_after_some_processes_keeps_what_they_measured(finished):
    with pytest.raises(InterruptedProcesses) as caught:
        run_cell(_cut_after(finished), ["triton"], 3)
    (rec,), running = caught.value.records, caught.value.running
    assert running == 0 and rec.processes == len(finished) and rec.process_medians_us == finished
    assert rec.median_us == pytest.approx(statistics.median(finished))
    assert rec.status == "ok" and rec.gbps is not None
    assert rec.reason.startswith(f"interrupted (SIGINT) after {len(finished)} of 3 processes")


def test_a_sigint_in_the_first_process_leaves_nothing_to_keep():
    with pytest.raises(InterruptedProcesses) as caught:
        run_cell(_cut_after([]), ["triton"], 3)
    assert caught.value.records == [None] and caught.value.running == 0


def test_a_cells_cases_take_turns_each_round_starting_one_later():
    assert rounds(3, 3) == [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
    assert rounds(2, 3) == [[0, 1], [1, 0], [0, 1]] and rounds(1, 2) == [[0], [0]]
    order, heard = [], []

    def run_fresh(spec):
        order.append(spec)
        return run(4.0 + len(order) / 100, impl=spec)
    recs = run_cell(run_fresh, ["triton", "liger", "torch_compile"], 3,
                    lambda spec, k, rec: heard.append((spec, k)))
    assert order == ["triton", "liger", "torch_compile", "liger", "torch_compile", "triton",
                     "torch_compile", "triton", "liger"]
    assert heard == [(spec, k) for k, spec in zip([1, 1, 1, 2, 2, 2, 3, 3, 3], order)]
    assert [r.impl for r in recs] == ["triton", "liger", "torch_compile"]   # the specs' order
    assert recs[0].process_medians_us == pytest.approx([4.01, 4.06, 4.08])   # its own processes


def test_a_sigint_mid_cell_keeps_every_case_that_finished_a_process():
    """Cut in round 1 at the second case: the first keeps its one process, the second (the
    one cut) and the third (not reached) have none. Cut in round 2: all three keep round 1."""
    with pytest.raises(InterruptedProcesses) as caught:
        run_cell(_cut_after([5.0]), ["a", "b", "c"], 3)
    first, second, third = caught.value.records
    assert caught.value.running == 1 and second is third is None
    assert first.processes == 1 and first.reason.startswith("interrupted (SIGINT) after 1 of 3")
    with pytest.raises(InterruptedProcesses) as caught:
        run_cell(_cut_after([5.0, 5.1, 5.2, 5.3]), ["a", "b", "c"], 3)   # round 2: b, then c is cut
    assert caught.value.running == 2
    assert [r.process_medians_us for r in caught.value.records] == [[5.0], [5.1, 5.3], [5.2]]


def test_a_case_that_errored_crashed_or_timed_out_runs_in_no_further_process():
    """Its record is decided (merge keeps the first such run): a hang must not cost
    case_timeout_s in every round. A failed check is timed: it runs on, and says in how many."""
    ran = []

    def run_fresh(spec):
        ran.append(spec)
        if spec == "hangs":
            return run(5.0, status="timeout", passed=None, median_us=None, reason="no result within 20 s")
        if spec == "wrong" and ran.count("wrong") == 1:
            return run(5.0, status="fail", passed=False, reason="1 of 6 checks failed")
        return run(5.0)
    hangs, wrong, fine = run_cell(run_fresh, ["hangs", "wrong", "fine"], 3)
    assert ran.count("hangs") == 1 and ran.count("wrong") == 3 and ran.count("fine") == 3
    assert hangs.status == "timeout" and hangs.processes == 1
    assert hangs.reason == "in process 1 of 3: no result within 20 s"
    assert wrong.status == "fail" and wrong.reason == "failed in 1 of 3 processes: 1 of 6 checks failed"
    assert fine.processes == 3


def test_a_sigint_after_a_crash_keeps_the_crash_as_it_is():
    crashed = run(5.0, status="crash", passed=None, median_us=None, reason="exit code 139")
    rec = partial([crashed], 3)
    assert rec.status == "crash" and rec.reason == "in process 1 of 3: exit code 139"


def test_a_sigint_echo_is_ignored_and_a_later_sigint_interrupts():
    """GNU timeout signals the command, then its process group: the same SIGINT twice. The
    first raises KeyboardInterrupt; the echo, arriving while that one is being handled
    (where it would cost a cell its finished processes), is ignored; a SIGINT after the window
    interrupts again; the previous handler is back after the block."""
    import os
    import signal
    import time

    from harness.run.interrupts import sigint_once
    before = signal.getsignal(signal.SIGINT)
    caught = 0
    with sigint_once(echo_s=0.5):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)   # the handler runs here
        except KeyboardInterrupt:
            caught += 1
            os.kill(os.getpid(), signal.SIGINT)   # the echo, inside the first one's handling
            time.sleep(0.05)
        time.sleep(0.5)
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        except KeyboardInterrupt:
            caught += 1
    assert caught == 2
    assert signal.getsignal(signal.SIGINT) is before


def test_the_worker_ignores_sigint_and_its_parent_stops_it(tmp_path):
    """A Ctrl-C reaches the whole process group: the worker must not die of it mid-case
    (its case would read as a crash); the parent handles the interrupt and stops it."""
    import os
    import signal
    import time

    import torch

    from harness.run.runner import CaseSpec, Settings
    from harness.measure.timing import TimingBudget
    from harness.run.worker import IsolatedRunner
    settings = Settings(seeds=1, base_seed=1, determinism_runs=2, invocation_id="t", roof_cache=False,
                        budget=TimingBudget(min_samples=3, max_seconds=0.05))
    runner = IsolatedRunner(torch.device("cpu"), settings, 120.0)
    try:
        first = runner.run(CaseSpec("copy", "eager", "-", "float32", (1000,)))
        pid = runner.proc.pid
        os.kill(pid, signal.SIGINT)
        time.sleep(0.5)
        assert runner.proc.is_alive()
        second = runner.run(CaseSpec("copy", "eager", "-", "float32", (1000,)))
        assert (first.status, second.status) == ("ok", "ok") and runner.proc.pid == pid
    finally:
        runner.stop()


def test_a_held_sigint_waits_for_the_end_of_the_hold_or_its_release():
    """Within SigintHold a SIGINT does not cut the work under way: it raises as the hold ends,
    or as a released() block begins; inside released() one raises at once; after the hold
    the previous handler is back."""
    import os
    import signal

    from harness.run.interrupts import SigintHold, sigint_once
    steps = []
    with sigint_once(echo_s=0.0):
        before = signal.getsignal(signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            with SigintHold():
                os.kill(os.getpid(), signal.SIGINT)
                steps.append("kept")
        with pytest.raises(KeyboardInterrupt):
            with SigintHold() as hold:
                os.kill(os.getpid(), signal.SIGINT)
                steps.append("kept")
                with pytest.raises(KeyboardInterrupt):
                    with hold.released():
                        steps.append("not reached")
                with pytest.raises(KeyboardInterrupt):
                    with hold.released():
                        os.kill(os.getpid(), signal.SIGINT)
                        signal.getsignal(signal.SIGINT)   # a call: the handler runs by now
                        steps.append("not reached")
                os.kill(os.getpid(), signal.SIGINT)   # held again after a release
                steps.append("kept")
        assert signal.getsignal(signal.SIGINT) is before
    assert steps == ["kept", "kept", "kept"]
