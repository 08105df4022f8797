"""Every implementation usable on this CPU (eager, torch_compile, Triton under its
interpreter, ...) against the float64 reference: regular, irregular and adversarial inputs,
all three dtypes, through the harness's own checks (NaN-poisoned output, fresh seeds)."""
import pytest
import torch

from harness import registry
from harness.measure.checks import result_of
from harness.run.runner import CaseSpec

CPU = torch.device("cpu")
OPS = registry.ops()
FRAMEWORKS = registry.frameworks()
for _fw in FRAMEWORKS.values():
    _fw.prepare(CPU)

# Regular, ragged (not a multiple of any block), single-element/row and long-row shapes.
# A row longer than a row on chip (Triton's MAX_ON_CHIP) is walked in column tiles of
# ROW_TILE (4096); the tests lower that limit to 4096 (LOOPED_LIMIT), so that a row of 5000
# walks two tiles, the second ragged, at a size the interpreter runs in seconds (the
# kernels' code does not depend on where the limit is).
LOOPED_LIMIT = 4096
# 9x781: masked columns, and a last tile short of rows (tiles of up to 4 rows). 33001:
# whole tiles and a ragged tail, in the elementwise rule's 2048-element tiles (17 programs)
# and in the 1-D reduction's 8192-element ones (five programs, the last taking the tail).
SHAPES = {1: [(1,), (4096,), (33001,)], 2: [(1, 1), (4, 4096), (9, 781), (2, 5000)]}


@pytest.fixture(autouse=True)
def _rows_loop_from_4096_columns(monkeypatch):
    from impls._frameworks.triton import rows
    monkeypatch.setattr(rows, "MAX_ON_CHIP", LOOPED_LIMIT)


# Numba's CUDA simulator runs a Python thread per CUDA thread: its kernels are checked at
# the sizes it can run, in tests/test_numba_sim.py.
OWN_CPU_TESTS = {"numba"}


def usable_impls():
    found = []
    for op in OPS:
        names = [n for n in registry.impl_modules(op)   # the product's frameworks, not the tests' plugins
                 if n in FRAMEWORKS and n not in OWN_CPU_TESTS and type(FRAMEWORKS[n]).__module__.startswith("impls.")
                 and FRAMEWORKS[n].unusable(CPU) is None]
        impls, failures = registry.load_impls(op, names)
        assert not failures, failures
        found += [i.key for i in impls]
    return found


IMPLS = usable_impls()


def test_the_cpu_covers_eager_and_torch_compile_for_every_op():
    for op in OPS:
        assert (op, "eager") in {(k[0], k[1]) for k in IMPLS}
        assert (op, "torch_compile") in {(k[0], k[1]) for k in IMPLS}


@pytest.mark.parametrize("key", IMPLS, ids=lambda k: "-".join(k))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_impl_matches_float64_reference(cpu_runner, numerics_runner, key, dtype):
    """... and keeps the launcher's contract (harness.measure.integrity), checked at the regular shape."""
    op, impl, variant = key
    spec = OPS[op]
    for i, shape in enumerate(SHAPES[spec.ndim]):
        rec = (cpu_runner if i == 1 else numerics_runner).run(CaseSpec(op, impl, variant, dtype, shape))
        assert rec.status in ("ok", "fail"), f"{shape}: {rec.status}: {rec.reason}\n{rec.traceback}"
        random_checks = [c for c in rec.checks if c["case"] == "random"]
        assert len(random_checks) >= 3 and all(c["passed"] for c in random_checks), rec.reason
        if variant in spec.negative_controls:
            continue   # expected to fail adversarial inputs: test_negative_controls_fail
        assert rec.passed, f"{op}/{impl}/{variant} {dtype} {shape}: {rec.reason}"
        assert len(rec.checks) == 3 + len(spec.adversarial)


def test_negative_controls_fail_their_adversarial_inputs(cpu_runner):
    found = [k for k in IMPLS if k[2] in OPS[k[0]].negative_controls]
    assert found, "no negative control is usable on the CPU"
    for op, impl, variant in found:
        rec = cpu_runner.run(CaseSpec(op, impl, variant, "float32", (8, 4096)))
        assert rec.status == "fail" and rec.negative_control
        failed = {c["case"] for c in rec.checks if not c["passed"]}
        assert "large_mean" in failed, rec.checks
        assert "negative control failed as expected" in rec.reason


@pytest.mark.parametrize("impl", sorted({k[1] for k in IMPLS if k[0] == "softmax"}))
def test_softmax_properties(impl):
    """Rows sum to 1, and adding a constant to a row changes nothing."""
    variants = [k[2] for k in IMPLS if k[0] == "softmax" and k[1] == impl]
    spec = OPS["softmax"]()
    for variant in variants:
        bind = registry.registered()[("softmax", impl, variant)].bind
        x = spec.inputs((9, 1500), torch.float32, CPU, seed=3)["x"]
        out = torch.empty_like(x)
        y = result_of(bind(x=x, out=out), out).clone()
        torch.testing.assert_close(y.sum(-1), torch.ones(9), rtol=0, atol=1e-5)
        out2 = torch.empty_like(x)
        y2 = result_of(bind(x=x + 100, out=out2), out2)
        torch.testing.assert_close(y2, y, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("variant", ["fused", "unfused"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_triton_chain_keeps_silus_tail(variant, dtype):
    """silu(n) = n·e^n for n in (-108, -88.7): tiny, but a normal or subnormal fp32 (and
    bf16), where n / (1 + exp(-n)) returns 0 because exp(-n) overflows. With r = 0 the
    output is that tail alone; the harness's own check against float64 must pass."""
    from harness.measure.checks import compare
    if ("rmsnorm_silu_mul_add", "triton", variant) not in IMPLS:
        pytest.skip("Triton is not usable here")
    op = OPS["rmsnorm_silu_mul_add"]()
    cols = 64
    x = torch.ones(3, cols, dtype=dtype)                            # rms 1: n = g
    weight = torch.linspace(-112.0, 4.0, cols).to(dtype)            # n from -112 (0 in fp32) to 4
    inputs = {"x": x, "weight": weight, "u": torch.ones_like(x), "r": torch.zeros_like(x), "eps": 0.0}
    ref = op.reference(**inputs)
    assert bool(((ref.abs() > 0) & (ref.abs() < 1e-36)).any())     # the tail is in the inputs
    out = torch.full_like(x, float("nan"))
    got = result_of(registry.registered()[("rmsnorm_silu_mul_add", "triton", variant)].bind(**inputs, out=out), out)
    check = compare(got, ref, op.tolerance(dtype), op.error_scale(inputs, ref), "silu_tail", 0)
    assert check.passed, check.detail


def test_the_unfused_chains_subnormal_silu_is_inside_its_budget():
    """silu(n) for n in (-21, -12) is subnormal in fp16: the unfused chain rounds it to a
    subnormal step, an absolute error that |u| = 4 carries past the output's own floor (the
    fp16 chain's large_gain failed on 1 element in 134M on an H100). Eager PyTorch's chain
    is that rounding and nothing else, so it must pass."""
    from harness.measure.checks import compare
    dtype = torch.float16
    op = OPS["rmsnorm_silu_mul_add"]()
    registry.load_impls(op.name, ["eager"])
    x = torch.ones(2, 512, dtype=dtype)                                 # rms 1: n = g
    weight = torch.linspace(-21.0, -12.0, 512).to(dtype)
    inputs = {"x": x, "weight": weight, "u": torch.full_like(x, 4.0), "r": torch.zeros_like(x), "eps": 0.0}
    ref = op.reference(**inputs)
    out = torch.empty_like(x)
    got = result_of(registry.registered()[(op.name, "eager", "unfused")].bind(**inputs, out=out), out)
    check = compare(got, ref, op.tolerance(dtype), op.error_scale(inputs, ref), "subnormal_silu", 0)
    assert check.passed, check.detail


def test_the_chains_budget_still_catches_a_flushed_fp32_tail():
    """The smallest-normal floor of the intermediates is u times it: an fp32 result that
    should be subnormal (silu(-95)·u ~ 2e-39) and came out 0 still fails."""
    from harness.measure.checks import compare
    op = OPS["rmsnorm_silu_mul_add"]()
    x = torch.ones(1, 8)
    inputs = {"x": x, "weight": torch.full((8,), -95.0), "u": torch.full_like(x, 4.0), "r": torch.zeros_like(x),
              "eps": 0.0}
    ref = op.reference(**inputs)
    assert bool((ref != 0).all()) and float(ref.abs().max()) < torch.finfo(torch.float32).tiny
    check = compare(torch.zeros_like(x), ref, op.tolerance(torch.float32), op.error_scale(inputs, ref), "ftz", 0)
    assert not check.passed and "subnormal" in check.detail


# The 1-D reductions' grid-stride loop: under the interpreter a grid of 32 programs takes
# 8192-element tiles below 2^20 elements, so only an input of more than 32 tiles gives a
# program a second one (the SHAPES above never do). 40 tiles and a ragged tail.
SEVERAL_TILES = (8192 * 40 + 3,)


@pytest.mark.parametrize("key", [k for k in IMPLS if k[0] in ("sum", "max") and k[1] == "triton"],
                         ids=lambda k: "-".join(k))
def test_the_1d_reductions_walk_several_tiles_per_program(numerics_runner, key):
    op, impl, variant = key
    rec = numerics_runner.run(CaseSpec(op, impl, variant, "float32", SEVERAL_TILES))
    assert rec.passed, f"{op}/{impl}/{variant} {SEVERAL_TILES}: {rec.reason}"
    assert len(rec.checks) == 3 + len(OPS[op].adversarial)
