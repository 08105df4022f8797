"""Dishonest impls (tests.plugins.cheats), each run as a case: caught as INVALID or FAIL
with a reason that names what it did, or its determinism / batch invariance reported as
they are; never an `ok` that hides it."""
import pytest

import tests.plugins.cheats as cheats
from harness.run.runner import CaseSpec

# Irregular sizes: 18x1001 fp32 leaves 2 elements after the last 16-byte pack, and its
# batch-invariance probes (1 and 10 rows) differ in parity from the full batch.
SHAPES = {"rmsnorm": (18, 1001), "softmax": (18, 1001), "copy": (18018,), "sum": (18018,)}


@pytest.mark.parametrize("key", sorted(cheats.EXPECTED), ids=lambda k: f"{k[0]}-{k[2]}")
def test_a_cheat_is_caught_and_named(cpu_runner, key):
    op, impl, variant = key
    rec = cpu_runner.run(CaseSpec(op, impl, variant, "float32", SHAPES[op])).as_dict()
    assert cheats.EXPECTED[key].met_by(rec), (rec["status"], rec["reason"], rec["deterministic"],
                                              rec["batch_invariant"])
    if variant == "background_thread":
        assert "works after the launcher returned" in rec["reason"], rec["reason"]
    if rec["status"] == "invalid":
        assert rec["gbps"] is None and rec["median_us"] is None   # not timed, no bandwidth


def test_a_launcher_that_stops_working_once_timed_is_caught_on_a_cpu():
    """faults.skips_when_timed (right for its first 32 launches, then empty) with enough
    launches before and during timing to pass 32: the refill after the timed launches finds
    its last answer (the physical limit, a GPU's, sees it only beyond the L2)."""
    import torch

    import tests.plugins.faults  # noqa: F401 - registers it
    from harness.run.runner import Runner, Settings
    from harness.measure.timing import TimingBudget
    runner = Runner(torch.device("cpu"), Settings(
        seeds=1, determinism_runs=10, roof_bytes=4 << 20, roof_cache=False,
        budget=TimingBudget(warmup_ms=0, min_samples=30, max_samples=30, max_seconds=5)))
    rec = runner.run(CaseSpec("rmsnorm", "faults", "skips_when_timed", "float32", (16, 1000)))
    assert rec.status == "invalid" and "refilled in place after the timed launches" in rec.reason, rec.reason
    assert rec.gbps is None
