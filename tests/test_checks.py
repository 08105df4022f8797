"""The checks themselves: each deliberately broken impl must be caught, and only for what
is wrong with it."""
import pytest
import torch

import tests.plugins.broken  # noqa: F401  (registers the broken impls in this process)
from harness.measure import checks
from harness.registry import Tol
from harness.run.runner import CaseSpec


def run(cpu_runner, variant, dtype="float32", shape=(16, 1000)):
    return cpu_runner.run(CaseSpec("rmsnorm", "broken", variant, dtype, shape))


def test_a_wrong_result_fails(cpu_runner):
    rec = run(cpu_runner, "wrong")
    assert rec.status == "fail" and not rec.passed
    assert all(not c["passed"] for c in rec.checks if c["case"] == "random")
    assert "outside tolerance" in rec.reason


def test_an_unwritten_element_is_caught_by_the_nan_poison(cpu_runner):
    rec = run(cpu_runner, "unwritten_tail")
    assert rec.status == "fail"
    random = [c for c in rec.checks if c["case"] == "random"]
    assert all(c["n_bad"] == 1 for c in random), random
    assert "NaN where a number was due" in rec.reason


def test_nondeterminism_is_counted(cpu_runner):
    rec = run(cpu_runner, "nondeterministic")
    assert rec.passed, rec.reason          # right within tolerance ...
    assert rec.deterministic is False      # ... but not repeatable
    assert rec.n_distinct > 1 and rec.max_ulp_spread == 1


def test_batch_variance_is_reported(cpu_runner):
    rec = run(cpu_runner, "batch_variant")
    assert rec.passed and rec.deterministic, rec.reason
    assert rec.batch_invariant is False
    assert "rows differ" in rec.batch_note and rec.batch_sizes == [1, 9]


def test_a_correct_impl_passes_every_check(cpu_runner):
    rec = cpu_runner.run(CaseSpec("rmsnorm", "eager", "-", "float32", (16, 1000)))
    assert rec.status == "ok" and rec.deterministic and rec.batch_invariant
    assert rec.max_ulp_spread == 0 and rec.n_distinct == 1


def test_an_exception_becomes_an_error_record(cpu_runner):
    rec = run(cpu_runner, "raises")
    assert rec.status == "error" and "this kernel always fails" in rec.reason
    assert "RuntimeError" in rec.traceback


def test_compare_nan_and_inf_rules():
    tol = Tol(0.0, 0.0, "exact")
    ref = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")], dtype=torch.float64)
    good = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert checks.compare(good, ref, tol, 1.0, "c", 0).passed
    for bad in ([1.0, 0.0, float("inf"), -float("inf")],          # NaN lost
                [1.0, float("nan"), -float("inf"), -float("inf")],  # wrong infinity
                [float("nan"), float("nan"), float("inf"), -float("inf")]):  # NaN invented
        assert not checks.compare(torch.tensor(bad), ref, tol, 1.0, "c", 0).passed


def test_compare_wrong_shape_fails():
    r = checks.compare(torch.zeros(3), torch.zeros(4, dtype=torch.float64), Tol(1, 1, "x"), 1.0, "c", 0)
    assert not r.passed and "elements" in r.detail


def test_tolerance_edges():
    ref = torch.tensor([1.0], dtype=torch.float64)
    tol = Tol(rtol=1e-3, atol=0.0, why="test")
    assert checks.compare(torch.tensor([1.0009]), ref, tol, 1.0, "c", 0).passed
    assert not checks.compare(torch.tensor([1.0011]), ref, tol, 1.0, "c", 0).passed
    scaled = Tol(rtol=0.0, atol=1e-3, why="test")
    assert checks.compare(torch.tensor([1.05]), ref, scaled, 100.0, "c", 0).passed
    assert not checks.compare(torch.tensor([1.2]), ref, scaled, 100.0, "c", 0).passed


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_ordered_bits_measure_ulps(dtype):
    x = torch.tensor([1.0, -1.0, 0.0, -0.0], dtype=dtype)
    up = torch.nextafter(x, torch.full_like(x, float("inf")))
    d = checks.ordered_bits(up) - checks.ordered_bits(x)
    assert d.tolist() == [1, 1, 1, 1]
    assert int(checks.ordered_bits(torch.tensor([0.0], dtype=dtype))) == \
        int(checks.ordered_bits(torch.tensor([-0.0], dtype=dtype)))


def test_determinism_counts_distinct_patterns():
    values = iter([torch.tensor([1.0]), torch.tensor([1.0]), torch.nextafter(torch.tensor([1.0]),
                   torch.tensor([2.0])), torch.tensor([1.0])])
    det = checks.determinism(lambda: next(values), torch.empty(1), runs=4)
    assert det.n_distinct == 2 and det.max_ulp_spread == 1 and not det.deterministic


def test_a_failure_names_the_band_it_missed_and_a_flushed_subnormal():
    # a per-element scale near 0 narrows atol's band far below atol itself: the message says so
    ref = torch.tensor([1.0, -1.3e-41], dtype=torch.float64)
    tol = Tol(rtol=1e-6, atol=1e-6, why="test")
    scale = torch.tensor([1.0, 0.0], dtype=torch.float64)
    r = checks.compare(torch.tensor([1.0, 0.0]), ref, tol, scale, "c", 0)
    assert not r.passed and r.n_bad == 1
    assert "(|error| 1.3e-41, allowed 1.41e-45)" in r.detail, r.detail
    assert "subnormal in float32 and the impl gave 0" in r.detail
    # an ordinary miss: the band is named, no word of subnormals
    r = checks.compare(torch.tensor([1.1, -1.3e-41]), ref, tol, scale, "c", 0)
    assert not r.passed and "allowed 2e-06" in r.detail and "subnormal" not in r.detail


def test_a_case_says_where_its_time_went(cpu_runner):
    """Each phase's wall seconds, in order, adding up to no more than the case took."""
    import time
    began = time.perf_counter()
    rec = run(cpu_runner, "nondeterministic")
    took = time.perf_counter() - began
    assert list(rec.seconds) == ["checks", "contract", "repeatability", "timing", "after"], rec.seconds
    assert all(v >= 0 for v in rec.seconds.values()) and sum(rec.seconds.values()) <= took
    assert rec.seconds["checks"] > 0 and rec.seconds["timing"] > 0
