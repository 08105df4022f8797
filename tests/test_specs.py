"""Every op spec against an independent computation, and the catalogue's invariants."""
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from harness import registry
from impls._common import DTYPES

OPS = registry.ops()
CONF = Path(__file__).resolve().parent.parent / "conf"


def numpy_reference(op, inputs):
    """The same formulas, written again in numpy float64 (or exact Python sums)."""
    a = {k: (v.double().numpy() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
    x = a["x"]
    if op == "copy":
        return x
    if op == "scale":
        return x * a["a"]
    if op == "sum":
        return np.float64(math.fsum(x.tolist()))
    if op == "max":
        return np.float64(np.nan) if np.isnan(x).any() else x.max()
    if op == "softmax":
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    if op == "rmsnorm":
        return x / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + a["eps"]) * a["weight"]
    if op == "layernorm":
        mu = x.mean(axis=-1, keepdims=True)
        return (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + a["eps"]) * a["weight"] + a["bias"]
    if op == "rmsnorm_silu_mul_add":
        n = x / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + a["eps"]) * a["weight"]
        return n / (1 + np.exp(-n)) * a["u"] + a["r"]
    raise AssertionError(op)


def small_shape(spec):
    return (1000,) if spec.ndim == 1 else (5, 333)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reference_matches_an_independent_computation(op, dtype):
    spec = OPS[op]()
    for case in ["random", *spec.adversarial]:
        if case == "many_terms":
            continue  # 2^25 terms: fsum of that in Python takes minutes; covered by the next test
        inputs = spec.inputs(small_shape(spec), dtype, "cpu", seed=7, case=case)
        with np.errstate(all="ignore"):
            want = numpy_reference(op, inputs)
        got = spec.reference(**inputs).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True,
                                   err_msg=f"{op} {case} {dtype}")


def test_sum_reference_is_exact_on_many_terms():
    spec = OPS["sum"]()
    x = spec.inputs((10,), torch.float32, "cpu", seed=1, case="many_terms")["x"]
    assert x.numel() > 2 ** 25
    # fp32 values summed in float64 are exact while the total stays below 2^53 ulps of the smallest term.
    assert float(spec.reference(x=x)) == float(np.sum(x.double().numpy(), dtype=np.float64))
    # and a running fp32 total would be far off: the case is adversarial for real
    running = np.cumsum(x.numpy(), dtype=np.float32)[-1]   # numpy adds sequentially in fp32
    assert abs(float(running) - float(spec.reference(x=x))) > 1e5


@pytest.mark.parametrize("op", OPS)
def test_bytes_moved_follow_the_catalogue(op):
    spec = OPS[op]()
    for dtype in DTYPES:
        s = dtype.itemsize
        if spec.ndim == 1:
            n = 12345
            read, written = spec.bytes_moved((n,), dtype)
            want = {"copy": (n * s, n * s), "scale": (n * s, n * s), "sum": (n * s, 0), "max": (n * s, 0)}[op]
        else:
            r, c = 37, 1001
            read, written = spec.bytes_moved((r, c), dtype)
            want = {"softmax": (r * c * s, r * c * s),
                    "rmsnorm": (r * c * s + c * s, r * c * s),
                    "layernorm": (r * c * s + 2 * c * s, r * c * s),
                    "rmsnorm_silu_mul_add": (3 * r * c * s + c * s, r * c * s)}[op]
        assert (read, written) == want


@pytest.mark.parametrize("op", OPS)
def test_tolerances_cover_every_dtype_and_say_why(op):
    spec = OPS[op]
    for dtype in DTYPES:
        tol = spec.tolerances[dtype]
        assert tol.rtol >= 0 and tol.atol >= 0 and len(tol.why) > 20
    lows = [spec.tolerances[d].rtol for d in (torch.bfloat16, torch.float16)]
    assert spec.tolerances[torch.float32].rtol <= min(lows)   # fp32 is never looser


@pytest.mark.parametrize("op", OPS)
def test_inputs_are_fresh_per_seed_and_repeatable_per_seed(op):
    spec = OPS[op]()
    shape = small_shape(spec)
    a = spec.inputs(shape, torch.float32, "cpu", seed=1)["x"]
    b = spec.inputs(shape, torch.float32, "cpu", seed=2)["x"]
    c = spec.inputs(shape, torch.float32, "cpu", seed=1)["x"]
    assert not torch.equal(a, b) and torch.equal(a, c)


@pytest.mark.parametrize("op", OPS)
def test_every_op_has_a_config_with_every_sweep_and_valid_shapes(op):
    path = CONF / "op" / f"{op}.yaml"
    cfg = yaml.safe_load(path.read_text())["ops"][op]
    spec = OPS[op](**(cfg.get("params") or {}))
    for sweep in ("smoke", "default", "full"):
        for shape in cfg["shapes"][sweep]:
            spec.validate_shape(shape)


def test_op_all_lists_every_op():
    listed = yaml.safe_load((CONF / "op" / "all.yaml").read_text())["defaults"]
    assert sorted(listed) == sorted(OPS)


def test_every_impl_module_belongs_to_a_framework():
    frameworks = registry.frameworks()
    for op in OPS:
        for name in registry.impl_modules(op):
            assert name in frameworks, f"impls/{op}/{name}.py has no framework in impls/_frameworks/"


def test_an_impl_with_a_naive_kernel_names_the_stage_of_each_other():
    """One stage vocabulary across frameworks (naive, idiomatic, tuned): beside a naive kernel,
    no kernel of the impl is ``-`` (an impl's only version), which would hide its stage.
    Read from the source (@impl's variant): the CPU cannot import every framework's module."""
    import ast
    found = []
    for path in sorted((CONF.parent / "impls").glob("*/*.py")):
        calls = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name) and n.func.id == "impl"]
        def variant(c):
            given = c.args[2] if len(c.args) > 2 else next((k.value for k in c.keywords if k.arg == "variant"), None)
            if given is None:
                return registry.NO_VARIANT
            return ast.literal_eval(given) if isinstance(given, ast.Constant) else "(computed)"
        variants = [variant(c) for c in calls]
        if "naive" in variants and registry.NO_VARIANT in variants:
            found.append(f"{path.relative_to(CONF.parent)}: {variants}")
    assert not found, "\n".join(found)


def test_variants_and_negative_controls_are_declared():
    assert OPS["layernorm"].negative_controls == ("unsafe",)
    for op, spec in OPS.items():
        assert set(spec.negative_controls) <= set(spec.variants)


def test_bad_shapes_are_refused_with_the_reason():
    spec = OPS["rmsnorm"]()
    with pytest.raises(ValueError, match="2-D"):
        spec.validate_shape((4,))
    with pytest.raises(ValueError, match="empty or negative"):
        spec.validate_shape((0, 4))
    with pytest.raises(ValueError, match="empty or negative"):
        spec.validate_shape((4, -1))


@pytest.mark.parametrize("op_name", ["rmsnorm", "layernorm", "rmsnorm_silu_mul_add"])
def test_a_norm_refuses_an_eps_that_is_negative_or_not_finite(op_name):
    spec_cls = registry.ops()[op_name]
    assert spec_cls(eps=0).eps == 0.0 and spec_cls(eps="1e-5").eps == 1e-5
    for bad in (-1e-5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="eps must be a finite number >= 0"):
            spec_cls(eps=bad)
