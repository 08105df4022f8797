"""Dishonest impls (tests.plugins.cheats), each run as a case: caught as INVALID or FAIL
with a reason that names what it did, or its determinism / batch invariance reported as
they are; never an `ok` that hides it."""
import pytest

import tests.plugins.cheats as cheats
from harness.runner import CaseSpec

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
