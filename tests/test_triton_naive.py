"""The naive Triton row kernels (the tutorial's form: a row per program, one block of
next_power_of_2(cols)): their launch rule, their refusal of rows longer than a block holds,
and rows that start off any 16-byte boundary, against float64 under the interpreter. The
irregular, adversarial and dtype cases run with every impl in test_impls_cpu.py."""
import pytest
import torch

from harness import registry
from harness.measure.checks import compare, result_of

CPU = torch.device("cpu")
OPS = registry.ops()
for _fw in registry.frameworks().values():
    _fw.prepare(CPU)
for _op in ("softmax", "rmsnorm", "layernorm"):
    registry.load_impls(_op, ["triton"])
NAIVE = [("softmax", "triton", "naive"), ("rmsnorm", "triton", "naive"), ("layernorm", "triton", "naive")]


def bind(key, inputs, out):
    return registry.registered()[key].bind(**inputs, out=out)


def test_the_launch_rule_is_a_block_of_the_row_rounded_up_and_warps_by_its_size():
    from impls._frameworks.triton.naive import num_warps
    assert [num_warps(b) for b in (1, 1024, 2048, 4096, 8192, 32768)] == [4, 4, 8, 8, 16, 16]
    spec = OPS["rmsnorm"]()
    x = spec.inputs((3, 781), torch.float32, CPU, seed=1)
    launch = bind(NAIVE[1], x, spec.make_output(x))
    assert launch.config == {"rows": 1, "BLOCK": 1024, "num_warps": 4, "source": "rule"}


@pytest.mark.parametrize("key", NAIVE, ids=lambda k: k[0])
def test_a_naive_kernel_asks_for_no_table_entry(key, monkeypatch):
    """Bound as on a GPU (no interpreter), it never reaches harness.launch.configs."""
    from harness.launch import configs

    def config_for(*args, **kwargs):
        raise AssertionError("the naive variant asked harness.launch.configs for a config")
    monkeypatch.setattr(configs, "config_for", config_for)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    spec = OPS[key[0]]()
    x = spec.inputs((2, 4096), torch.float32, CPU, seed=1)
    assert bind(key, x, spec.make_output(x)).config["source"] == "rule"


@pytest.mark.parametrize("key", NAIVE, ids=lambda k: k[0])
def test_a_row_longer_than_one_block_is_refused_with_the_reason(key):
    spec = OPS[key[0]]()
    x = spec.inputs((1, 32769), torch.float32, CPU, seed=1)
    with pytest.raises(registry.Unavailable, match="at most 32768 elements; rows of 32769 run in the tuned"):
        bind(key, x, spec.make_output(x))


@pytest.mark.parametrize("key", NAIVE, ids=lambda k: k[0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rows_that_start_off_a_16_byte_boundary_match_float64(key, dtype):
    """x one element into its buffer (contiguous, misaligned) and 13x777 columns: every row
    starts at another offset, and the block of 1024 is masked past 777."""
    spec = OPS[key[0]]()
    inputs = spec.inputs((13, 777), dtype, CPU, seed=7)
    buf = torch.empty(13 * 777 + 1, dtype=dtype)
    buf[1:] = inputs["x"].reshape(-1)
    inputs["x"] = buf[1:].view(13, 777)
    assert inputs["x"].data_ptr() % 16 != 0
    out = spec.make_output(inputs)
    got = result_of(bind(key, inputs, out), out)
    ref = spec.reference(**inputs)
    check = compare(got, ref, spec.tolerance(dtype), spec.error_scale(inputs, ref), "misaligned", 7)
    assert check.passed, check


@pytest.mark.parametrize("key", NAIVE, ids=lambda k: k[0])
def test_a_strided_view_is_refused(key):
    spec = OPS[key[0]]()
    inputs = spec.inputs((4, 64), torch.float32, CPU, seed=1)
    inputs["x"] = inputs["x"][:, ::2]
    with pytest.raises(ValueError, match="naive Triton .* takes contiguous"):
        bind(key, inputs, torch.empty(4, 32))
