"""One failing implementation never stops the others, even when it kills its process or hangs."""
import pytest

from tests.helpers import results, run_harness


def harness(tmp_path, *args, timeout=600):
    proc = run_harness(tmp_path, *args, "tracking=none", "sweep=smoke", "dtype=fp32", timeout=timeout,
                       env={"HARNESS_PLUGINS": "tests.plugins.broken"})
    return proc, results(tmp_path)


@pytest.mark.slow
def test_crash_hang_and_raise_each_cost_only_their_own_case(tmp_path):
    # a case of 4x64 takes under 0.1 s once its worker is up (the worker's start is not timed):
    # 5 s is what the hang costs, and 50 times what the others need
    proc, records = harness(tmp_path, "op=rmsnorm", "impl=[broken,eager]",
                            "variant=[crashes,hangs,raises,-]", "shapes=[[4,64]]", "case_timeout_s=5")
    assert proc.returncode == 0, proc.stderr
    status = {(r["impl"], r["variant"]): r["status"] for r in records}
    assert status == {("broken", "crashes"): "crash", ("broken", "hangs"): "timeout",
                      ("broken", "raises"): "error", ("eager", "-"): "ok"}, status
    by = {(r["impl"], r["variant"]): r for r in records}
    assert "exit code 139" in by[("broken", "crashes")]["reason"]
    assert "case_timeout_s=5" in by[("broken", "hangs")]["reason"]
    assert "CRASH" in proc.stdout and "TIMEOUT" in proc.stdout


def test_strict_mode_exits_nonzero_on_a_failure(tmp_path):
    proc, records = harness(tmp_path, "op=rmsnorm", "impl=broken", "variant=wrong",
                            "shapes=[[4,64]]", "strict=true", "isolate=false")
    assert proc.returncode == 1 and records[0]["status"] == "fail"


def test_a_worker_slow_to_exit_is_killed_after_its_grace(monkeypatch):
    """A worker whose exit lingers (as torch.compile's compile pool can make it) costs the
    next case no more than the runner's grace: processes=N replaces a worker per process."""
    import time

    import torch

    from harness.run.runner import CaseSpec, Settings
    from harness.run.worker import IsolatedRunner
    monkeypatch.setenv("HARNESS_PLUGINS", "tests.plugins.broken")   # the spawned worker reads it
    runner = IsolatedRunner(torch.device("cpu"), Settings(seeds=1, determinism_runs=2), case_timeout_s=120)
    try:
        rec = runner.run(CaseSpec("rmsnorm", "broken", "lingers", "float32", (4, 64)))
        assert rec.status == "ok", rec.reason
        worker = runner.proc
        started = time.monotonic()
        runner.stop()
        took = time.monotonic() - started
    finally:
        runner.stop(kill=True)
    assert not worker.is_alive() and took < runner.exit_grace_s + 5, took


@pytest.mark.slow
def test_processes_interleave_a_cells_impls_and_a_crash_costs_only_its_own(tmp_path):
    """processes=2: the two impls of one shape take turns (round 2 starts at the second),
    each process in a fresh worker; the crashing one's record is its crash, and it runs in
    no second process; the other's record merges its two."""
    proc, records = harness(tmp_path, "op=rmsnorm", "impl=[broken,eager]", "variant=[crashes,-]",
                            "shapes=[[4,64]]", "processes=2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    turns = [line.split(": ")[0].strip() for line in proc.stdout.splitlines() if line.startswith("  process ")]
    assert turns == ["process 1 of 2", "process 1 of 2", "process 2 of 2"], proc.stdout
    order = [line.split()[5] for line in proc.stdout.splitlines() if line.startswith("  process ")]
    assert order == ["broken/crashes", "eager", "eager"], proc.stdout
    by = {r["impl"]: r for r in records}
    assert by["broken"]["status"] == "crash" and by["broken"]["reason"].startswith("in process 1 of 2: ")
    assert by["eager"]["status"] == "ok" and len(by["eager"]["process_medians_us"]) == 2
    assert len(set(by["eager"]["provenance"]["worker_pids"])) == 2
