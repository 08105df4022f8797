"""The Numba kernels on a CPU, under Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1, which the
framework sets for a CPU device): every op and variant through the harness's own checks
against the float64 reference (NaN-poisoned output, fresh seeds, the op's adversarial sets),
at small, irregular sizes and on misaligned views; the simulated warp shuffles against the
hardware's definition; bf16's bit conversions against torch's.

The simulator runs a Python thread per CUDA thread, so the sizes are small: large enough for
every path of the kernels (one thread a row, part of a warp, several warps; grid-stride steps
and a ragged tail), no larger. sum's 2^25-term input set is out of its reach (the GPU tests
run it); what the simulator does not check at all is listed in docs/frameworks/numba.md."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from harness import registry
from harness.measure.checks import checked_launch
from harness.run.runner import CaseSpec
from tests import numba_keeps
from tests.layouts import misaligned

CPU = torch.device("cpu")
FRAMEWORK = registry.frameworks()["numba"]
FRAMEWORK.prepare(CPU)
pytest.importorskip("numba")
if FRAMEWORK.unusable(CPU):
    pytest.skip(f"Numba is not usable here: {FRAMEWORK.unusable(CPU)}", allow_module_level=True)
from numba import cuda  # noqa: E402 - after the simulator is switched on; kernels see it as a global

from impls._frameworks.numba import naive  # noqa: E402

# -inf - -inf and the like in numpy scalars warn where the GPU quietly gives NaN, as it must.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning",
                                        "ignore:overflow encountered:RuntimeWarning")

OPS = registry.ops()


def numba_impls():
    found = []
    for op in OPS:
        if "numba" in registry.impl_modules(op):
            impls, failures = registry.load_impls(op, ["numba"])
            assert not failures, failures
            found += [i.key for i in impls if i.impl == "numba"]
    return found


IMPLS = numba_impls()
DTYPES = ["float32", "bfloat16", "float16"]
# 1-D: grid-stride steps (4099) and ragged tails on 4 blocks of 64 threads (launch.SIM_CONFIG);
# rows: 7 columns (a thread a row, 32 rows a block), 100 (a group of 8 threads, part of a
# warp), 600 (two warps a row, merged through shared memory).
CONTRACT_SHAPE = {1: (1000,), 2: (5, 100)}
SHAPES = {1: [(1,), (4099,)], 2: [(1, 1), (3, 7), (2, 600)]}
TOO_BIG_FOR_THE_SIMULATOR = {"many_terms"}   # 2^25 + 3 elements: on the GPU only


FIRST_KERNELS = naive.FIRST_KERNELS   # beside the op's own variants

# layernorm's large_mean set draws at least 128 rows of fp16 or bf16 below 512 columns
# (impls/layernorm: LARGE_MEAN_ROWS) so that the negative control fails in nearly every case: a
# bf16 row passes E[x²] - E[x]² by luck up to 96% of the time. Under the simulator (a Python
# thread a CUDA thread) those rows are most of a 16-bit case's time. Outside the negative
# control's own check the set draws 16 rows from 8 columns up: E[x²] - E[x]² planted in each
# stable kernel fails on them at every size here (65 to 101 columns: 70 to 1215 elements), as it
# fails in every fp32 row. At 7 columns (88% of bf16 rows pass it) the spec's 128 stay.
LAYERNORM = sys.modules[OPS["layernorm"].__module__]
SPEC_LARGE_MEAN_ROWS, STABLE_LARGE_MEAN_ROWS = LAYERNORM.LARGE_MEAN_ROWS, ((8, 128), (1 << 62, 16))


@pytest.fixture(autouse=True)
def fewer_large_mean_rows(monkeypatch):
    monkeypatch.setattr(LAYERNORM, "LARGE_MEAN_ROWS", STABLE_LARGE_MEAN_ROWS)


def test_every_op_and_variant_has_a_numba_impl():
    for name, spec in OPS.items():
        variants = {k[2] for k in IMPLS if k[0] == name}
        first = {FIRST_KERNELS[name]} if name in FIRST_KERNELS else set()
        own = set(spec.variants) or {"tuned" if first else registry.NO_VARIANT}   # a stage beside the first
        assert variants == own | first, (name, variants)


@pytest.mark.parametrize("op", FIRST_KERNELS)
def test_a_first_kernel_runs_a_block_a_row_and_is_right_past_a_step(cpu_runner, op):
    """One block a row at its fixed block size (in the simulator one warp), no table; rows of 65
    columns: two whole steps of the block and one column more, the other lanes idle in the third."""
    rec = cpu_runner.run(CaseSpec(op, "numba", FIRST_KERNELS[op], "bfloat16", (3, 65)))
    assert rec.status == "ok", f"{rec.status}: {rec.reason}\n{rec.traceback}"
    assert rec.deterministic and rec.batch_invariant, (rec.n_distinct, rec.batch_note)
    assert {k: rec.impl_config[k] for k in ("threads", "rows_per_block", "simulated")} == {
        "threads": 32, "rows_per_block": 1, "simulated": True}, rec.impl_config


@pytest.fixture
def within_the_simulator(monkeypatch):
    """Ops without the input sets the simulator cannot run (they run on the GPU)."""
    for spec in OPS.values():
        kept = {k: v for k, v in spec.adversarial.items() if k not in TOO_BIG_FOR_THE_SIMULATOR}
        if kept != spec.adversarial:
            monkeypatch.setattr(spec, "adversarial", kept)


@pytest.mark.parametrize("key", IMPLS, ids=lambda k: "-".join(k))
def test_the_harness_checks_pass_under_the_simulator(cpu_runner, within_the_simulator, monkeypatch, key):
    """Every check of a harness case, the launcher's contract included, one dtype per variant
    (the next test takes all three)."""
    op, impl, variant = key
    spec = OPS[op]
    if variant in spec.negative_controls:   # it must fail the set the harness draws
        monkeypatch.setattr(LAYERNORM, "LARGE_MEAN_ROWS", SPEC_LARGE_MEAN_ROWS)
    dtype = DTYPES[IMPLS.index(key) % len(DTYPES)]
    rec = cpu_runner.run(CaseSpec(op, impl, variant, dtype, CONTRACT_SHAPE[spec.ndim]))
    assert rec.timer == "wall_interpreter" and rec.gbps is None, (rec.timer, rec.gbps)
    assert rec.impl_config.get("simulated") is True, rec.impl_config
    if variant in spec.negative_controls:
        assert rec.status == "fail" and rec.negative_control, rec.reason
        assert any(c["case"] == "large_mean" and not c["passed"] for c in rec.checks), rec.checks
        return
    assert rec.status == "ok", f"{rec.status}: {rec.reason}\n{rec.traceback}"
    assert rec.deterministic, f"{rec.n_distinct} distinct results"   # the simulator runs blocks in turn
    if spec.row_op:
        assert rec.batch_invariant, rec.batch_note


@pytest.mark.parametrize("key", IMPLS, ids=lambda k: "-".join(k))
@pytest.mark.parametrize("dtype", DTYPES)
def test_right_on_irregular_sizes_and_misaligned_views(key, dtype):
    """Fresh random inputs at every size, the adversarial sets at the small ones, x (and the
    output, when it has rows) at odd element offsets, through the harness's checked launch."""
    op_name, impl, variant = key
    spec = OPS[op_name]
    op = spec()
    bind = registry.registered()[key].bind
    failures = []
    for shape in SHAPES[spec.ndim]:
        small = shape[-1] <= 100
        for case in ["random", *([c for c in op.adversarial if c not in TOO_BIG_FOR_THE_SIMULATOR] if small else [])]:
            seed = sum(shape) + len(case)
            inputs = op.inputs(shape, getattr(torch, dtype), CPU, seed=seed, case=case)
            moved = {k: misaligned(v, 1 + i % 3) if isinstance(v, torch.Tensor) else v
                     for i, (k, v) in enumerate(inputs.items())}
            out = op.make_output(moved)
            if out.dim() > 0:
                out = misaligned(out, 3)
            result, _ = checked_launch(op, bind(**moved, out=out), moved, out, getattr(torch, dtype), case, seed,
                                       lambda: None)
            if not result.passed:
                failures.append(f"{list(shape)} {case}: {result.detail}")
    if variant in spec.negative_controls:
        return   # its failures are its purpose (the test above checks it fails large_mean)
    assert not failures, "\n".join(failures)


def test_the_simulator_refuses_what_it_cannot_run_with_a_reason():
    bind = registry.registered()[("sum", "numba", "two_pass")].bind
    x = torch.zeros(2 ** 25 + 3)
    with pytest.raises(registry.TooLarge, match="too large for Numba's CUDA simulator"):
        bind(x=x, out=torch.empty(()))


def test_an_input_set_too_large_for_the_simulator_is_left_out_and_said_and_the_case_runs(cpu_runner):
    """sum's 2^25-term set cannot run under the simulator: the case runs its other sets and is
    ok, its reason names the set left out; a shape no set of which fits is skipped, not an error."""
    from harness.run.runner import CaseSpec
    rec = cpu_runner.run(CaseSpec("sum", "numba", "two_pass", "float32", (1000,)))
    assert rec.status == "ok", rec.reason
    assert "input sets not run here: many_terms" in rec.reason and "too large for Numba's CUDA simulator" in rec.reason
    left = [c for c in rec.checks if c["case"] == "many_terms"]
    assert left and left[0]["passed"] is None and all(c["passed"] for c in rec.checks if c["case"] != "many_terms")
    rec = cpu_runner.run(CaseSpec("copy", "numba", "-", "float32", (2 ** 23 + 1,)))
    assert rec.status == "skipped" and "no input set fits here" in rec.reason, (rec.status, rec.reason)


def test_simulated_shuffles_are_the_hardware_s():
    """shfl_xor/down/up/idx over two warps of one block: each lane gets its source lane's
    value, a lane whose source is outside the warp keeps its own (down/up), warps apart."""
    @cuda.jit
    def shuffles(out):
        i = cuda.threadIdx.x
        v = i * 10
        out[0, i] = cuda.shfl_xor_sync(0xFFFFFFFF, v, 5)
        out[1, i] = cuda.shfl_down_sync(0xFFFFFFFF, v, 3)
        out[2, i] = cuda.shfl_up_sync(0xFFFFFFFF, v, 2)
        out[3, i] = cuda.shfl_sync(0xFFFFFFFF, v, 7)

    out = np.zeros((4, 64), dtype=np.int64)
    shuffles[1, 64](out)
    lane = np.arange(64) % 32
    warp = np.arange(64) // 32 * 32
    assert (out[0] == (warp + (lane ^ 5)) * 10).all()
    assert (out[1] == (warp + np.where(lane + 3 < 32, lane + 3, lane)) * 10).all()
    assert (out[2] == (warp + np.where(lane >= 2, lane - 2, lane)) * 10).all()
    assert (out[3] == (warp + 7) * 10).all()


def test_bf16_bits_convert_as_torch_converts():
    """Every bf16 bit pattern to fp32 exactly; fp32 to bf16 rounded to nearest even (ties
    both ways, the carry into the exponent, ±inf, overflow to inf, subnormals), NaN kept NaN."""
    from impls._frameworks.numba.device import bf16_to_f32
    from impls._frameworks.numba.primitives import f32_to_bf16
    bits = np.arange(-32768, 32768, dtype=np.int16)
    want = torch.from_numpy(bits.copy()).view(torch.bfloat16).float().numpy()
    got = np.array([bf16_to_f32(b) for b in bits], dtype=np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)) or \
        np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
    specials = np.array([0x3F808000, 0x3F818000, 0x3F80FFFF, 0x7F7FFFFF, 0x7F7F8000, 0x00000001, 0x80008000,
                         0x7F800000, 0xFF800000, 0x7FC00001, 0xFF800001, 0x7F800001], dtype=np.uint32).view(np.float32)
    values = np.concatenate([specials, np.random.default_rng(0).standard_normal(4000).astype(np.float32) * 1e3])
    got = np.array([f32_to_bf16(v) for v in values], dtype=np.int16)
    want = torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy()
    nan = np.isnan(values)
    assert np.array_equal(got[~nan], want[~nan])
    back = torch.from_numpy(got[nan].copy()).view(torch.bfloat16).float()
    assert back.isnan().all() and (np.signbit(back.numpy()) == np.signbit(values[nan])).all()


def test_every_kernel_compiles_for_the_gpu():
    """The simulator runs kernels as Python and never types them: Numba compiles each one to
    PTX for sm_90 here, for every storage type (tests/numba_compile.py, the simulator off)."""
    script = Path(__file__).with_name("numba_compile.py")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    if proc.returncode and "Failure finding" in proc.stdout + proc.stderr:   # cuda-pathfinder's "not found"
        pytest.skip("no NVRTC or libnvvm for Numba to compile with (requirements-dev.txt's nvidia-cuda-nvrtc and "
                    f"a CUDA toolkit): {(proc.stdout + proc.stderr)[-500:]}")
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert proc.stdout.count("\nok ") + proc.stdout.startswith("ok ") >= 47, proc.stdout


ALIGNMENT_CASES = [("rmsnorm", "tuned", 102), ("layernorm", "welford", 102),
                   ("rmsnorm", "tuned", 104), ("layernorm", "two_pass", 104), ("softmax", "three_pass", 104),
                   ("rmsnorm_silu_mul_add", "fused", 104)]


@pytest.mark.parametrize("op_name,variant,cols", ALIGNMENT_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_row_s_bits_do_not_depend_on_its_alignment(op_name, variant, cols, dtype):
    """The row kernels move whole aligned chunks as 16-byte loads and stores and the rest one
    element at a time, in the same order: the same rows at every element offset (16-byte
    aligned or not) give the same bits (batch invariance across allocations). At 104 columns
    (a whole number of chunks: 8 columns of a 16-bit type, 4 of fp32) the aligned offset runs
    the kernel for whole rows (rows.whole) and the others the kernel for any rows: the two give
    the same bits. The 1-D reductions' chunks start at the first aligned element,
    so their order, and bits, follow the address."""
    spec = OPS[op_name]
    op = spec()
    bind = registry.registered()[(op_name, "numba", variant)].bind
    shape = (5, cols)
    inputs = op.inputs(shape, getattr(torch, dtype), CPU, seed=7, case="random")
    results, kinds = [], []
    for offset in range(4):
        moved = {k: misaligned(v, offset) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
        out = op.make_output(moved)
        if out.dim() > 0:   # offset 3: x misaligned, the output aligned (the kernel for any rows still)
            out = misaligned(out, offset and (offset + 1) % 4)
        launch = bind(**moved, out=out)
        kinds.append(launch.config["whole"])
        launch()
        results.append(out.clone())
    assert kinds == [cols % (16 // torch.empty(0, dtype=getattr(torch, dtype)).element_size()) == 0, False, False,
                     False], kinds
    for offset, got in enumerate(results[1:], 1):
        assert torch.equal(got.view(-1).view(torch.uint8), results[0].view(-1).view(torch.uint8)), \
            f"{op_name} {dtype}: offset {offset} gave other bits than offset 0"


# The norms and the chain read a row again or cache it (the tuner chooses); on_chip always
# caches it; three_pass and online always read it again.
CACHE_CHOICES = {"on_chip": (True,), "three_pass": (False,), "online": (False,)}
ROW_IMPLS = numba_keeps.row_impls()


@pytest.mark.parametrize("key", ROW_IMPLS, ids=lambda k: "-".join(k))
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_rows_read_in_several_steps_are_right_and_the_cache_changes_no_bit(monkeypatch, key, dtype):
    """The simulator's own config (rows.sim_config) covers each row in one step (its values kept
    in registers); here a group of 2 threads takes each row in several steps, the last one
    partial, with the row cached in shared memory or read again: both right against the
    float64 reference, on whole rows (104 columns, aligned) and on any rows (101, misaligned,
    every input set), and the same bits either way (``cached`` is neutral: rows.py)."""
    from impls._frameworks.numba import rows
    op_name, _, variant = key
    op = OPS[op_name]()
    bind = registry.registered()[key].bind
    failures = []
    for cols, offset in ((104, 0), (101, 1)):
        for case in ["random", *(op.adversarial if offset else ())]:
            inputs = op.inputs((3, cols), getattr(torch, dtype), CPU, seed=cols + len(case), case=case)
            moved = {k: misaligned(v, offset) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
            outs = []
            for cached in CACHE_CHOICES.get(variant, (True, False)):
                def config(n, cacheable, itemsize, keeps=(), cached=cached):
                    c = rows.shape(2, n, cacheable, itemsize)
                    assert not c["kept"], c
                    return {**c, "cached": cached and cacheable}
                monkeypatch.setattr(rows, "sim_config", config)
                out = misaligned(op.make_output(moved), offset)
                launch = bind(**moved, out=out)
                assert launch.config["whole"] == (offset == 0), (cols, offset, launch.config)   # both kernels run
                result, _ = checked_launch(op, launch, moved, out, getattr(torch, dtype), case, cols, lambda: None)
                if not result.passed:
                    failures.append(f"{cols} columns, {case}, cached={cached}: {result.detail}")
                outs.append(out.clone())
            if len(outs) == 2 and not torch.equal(outs[0].view(torch.uint8), outs[1].view(torch.uint8)):
                failures.append(f"{cols} columns, {case}: the cached row gave other bits than the row read again")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("key", ROW_IMPLS, ids=lambda k: "-".join(k))
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_kept_row_s_bits_are_the_same_group_s_row_cached_and_read_again(monkeypatch, key, dtype):
    """Where one step of the group covers the row its kernel keeps it in registers (rows.keep:
    16-bit values as their raw words, the passes unrolled once); the same group's kernels for
    a cached row and a row read again loop over the same step. All three are right against the
    float64 reference and give the same bits, on whole rows (104 columns, aligned) and on any
    rows (101, misaligned, every input set): where a row is kept changes no bit (rows.py).
    tests/test_gpu.py checks the same of the compiled kernels."""
    found = numba_keeps.failures(key, getattr(torch, dtype), CPU, monkeypatch, ((104, 0), (101, 1)), 3,
                                 lambda offset, op: ["random", *(op.adversarial if offset else ())])
    assert not found, "\n".join(found)


@pytest.mark.parametrize("cols", [4096, 65536, 1 << 20])
def test_every_row_length_has_a_config_of_at_most_512_threads(cols):
    """A 1024-thread block does not launch for a kernel of more than 64 registers a thread (the
    16-bit chain's cached kernel on sm_90): the tuner's space for any row length holds a
    group of at most 512 threads."""
    from impls._frameworks.numba import rows
    for itemsize in (2, 4):
        space = rows.configs(cols, True, itemsize)
        assert any(c["group"] <= 512 and c["threads"] <= 512 for c in space), space


def test_a_simulated_warp_waits_for_a_slow_lane_and_gives_up_only_when_the_launch_aborts():
    """simwarp's shuffle: lanes exchange values however long one lane takes (no time limit),
    and a lane left waiting by a warp-mate that failed raises once the launch aborts."""
    import threading
    import time

    from impls._frameworks.numba import simwarp
    warp, got = simwarp._Warp(2), {}

    def lane(i, delay):
        time.sleep(delay)
        got[i] = warp.exchange(i, f"v{i}", 1 - i)
    threads = [threading.Thread(target=lane, args=(0, 0.0)), threading.Thread(target=lane, args=(1, 1.2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == {0: "v1", 1: "v0"}
    alone, errors = simwarp._Warp(2), []

    def waiting():
        try:
            alone.exchange(0, 1.0, 1)
        except RuntimeError as e:
            errors.append(str(e))
    t = threading.Thread(target=waiting)
    t.start()
    time.sleep(0.2)
    t.abort = True   # what the simulator sets on every thread when one raises
    t.join(5)
    assert not t.is_alive() and errors and "another lane" in errors[0]


def _refusal(monkeypatch, key, cols, dtype, **changes):
    """The error ``key``'s bind gives (before any launch) for the simulator's config with ``changes``."""
    from impls._frameworks.numba import rows
    op = OPS[key[0]]()
    inputs = op.inputs((2, cols), dtype, CPU, seed=cols, case="random")
    monkeypatch.setattr(rows, "sim_config", lambda n, cacheable, size, keeps=(): {**rows.shape(1, n, cacheable, size),
                                                                                        **changes})
    with pytest.raises(ValueError) as error:
        registry.registered()[key].bind(**inputs, out=op.make_output(inputs))
    return str(error.value)


def test_a_config_its_kernel_cannot_take_is_refused_before_its_launcher_is_made(monkeypatch):
    """rows.check: a kept row on a group whose step does not cover it would write only that step
    (64 fp32 columns on one thread: 16 a step) and a variant's missing keep has no kernel;
    both are refused by the op's bind, naming the problem and what to give, as is each other
    config no kernel takes."""
    from impls._frameworks.numba import rows
    message = _refusal(monkeypatch, ("rmsnorm", "numba", "tuned"), 64, torch.float32, kept=True, cached=False)
    assert "Numba rmsnorm: kept needs one step" in message and "16 of a row's 64 columns" in message \
        and "give kept=False or a group of at least 4" in message, message
    message = _refusal(monkeypatch, ("softmax", "numba", "three_pass"), 64, torch.float32, kept=False, cached=True)
    assert "Numba softmax three_pass has no kernel for a row cached (it has kept, read)" in message, message
    fine = rows.shape(4, 64, True, 4)
    for changes, expected in (
            (dict(group=3), "power of two from 1 to 1024, got 3"),
            (dict(group=2048), "power of two from 1 to 1024, got 2048"),
            (dict(threads=48), "48 threads a block: give a multiple of 32"),
            (dict(group=64, threads=32), "multiple of 32 and of the row's 64 threads"),
            (dict(threads=2048), "at most 1024"),
            (dict(chunk=8), "holds 4 columns (16 bytes), got chunk 8"),
            (dict(kept=True, cached=True), "not both"),
            (dict(group=32, threads=1024, kept=False, cached=True), "past the 48128 a block may take")):
        with pytest.raises(ValueError) as error:
            rows.check({**fine, **changes}, 64 if "cached" not in changes or changes.get("kept") else 1000, 4, "op")
        assert expected in str(error.value), (changes, str(error.value))


def test_every_config_the_tuner_or_the_simulator_gives_passes_the_check():
    from impls._frameworks.numba import rows
    for cols in (1, 7, 100, 101, 600, 4096, 12289, 65536, 1 << 20):
        for itemsize in (2, 4):
            for cacheable in (True, False):
                for config in [*rows.configs(cols, cacheable, itemsize), rows.sim_config(cols, cacheable, itemsize)]:
                    rows.check(config, cols, itemsize, "op")


def test_the_tuner_s_space_offers_each_variant_only_the_keeps_it_has_kernels_for():
    """A 1024-thread group keeping its row in registers comes with the same group not keeping it
    (one block a SM otherwise, rows.configs); a variant without a kernel for a keep (softmax
    on_chip: kept or cached; three_pass: kept or read) never gets a config of it, so a long
    fp32 row gets on_chip's kept group alone rather than configs its launcher refuses."""
    from impls._frameworks.numba import rows
    space = rows.configs(16384, False, 4)
    assert [(c["group"], rows.keep(c)) for c in space] == [(256, rows.READ), (512, rows.READ), (1024, rows.KEPT),
                                                          (1024, rows.READ)], space
    assert {c["group"]: c for c in space if rows.keep(c) == rows.READ}[1024]["threads"] == 1024
    on_chip = rows.configs(16384, True, 4, (rows.KEPT, rows.CACHED))
    assert [(c["group"], rows.keep(c)) for c in on_chip] == [(1024, rows.KEPT)], on_chip
    assert sum(c["group"] == 1024 for c in rows.configs(8192, True, 4)) == 1   # 512 keeps the row: no alternative
    assert all(rows.keep(c) != rows.CACHED for c in rows.configs(16384, False, 2, (rows.KEPT, rows.READ)))
    # a row no kept or cached config covers: the space is left whole, and the launcher says why
    assert rows.configs(1 << 20, True, 4, (rows.KEPT, rows.CACHED))


def test_the_simulator_s_config_is_one_the_variant_has_a_kernel_for():
    """softmax on_chip (kept or cached) on a row too long to cache takes the smallest group
    that keeps it in registers, under the simulator as on the GPU, not a read-again config its
    launcher refuses; and it runs right there."""
    from impls._frameworks.numba import rows
    config = rows.sim_config(16384, True, 4, (rows.KEPT, rows.CACHED))
    assert rows.keep(config) == rows.KEPT and config["group"] == 1024, config
    assert rows.keep(rows.sim_config(16384, True, 4)) == rows.READ   # a variant that has it keeps the default
    spec = OPS["softmax"]()
    inputs = spec.inputs((1, 12289), torch.float32, CPU, seed=5)
    out = spec.make_output(inputs)
    launch = registry.registered()[("softmax", "numba", "on_chip")].bind(**inputs, out=out)
    assert rows.keep(launch.config) == rows.KEPT, launch.config
    result, _ = checked_launch(spec, launch, inputs, out, torch.float32, "random", 5, lambda: None)
    assert result.passed, result.detail


def test_every_thread_of_a_block_gets_one_shared_array_however_the_threads_interleave():
    """The simulator's cuda.shared.array looks its array up by the calling line and makes it
    when missing; unlocked, two threads could each make one (8 of 50 trials of 64 threads
    did, switching threads every microsecond), and a block reduction read the other's
    uninitialised array. simwarp.install locks that step."""
    import threading

    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    from impls._frameworks.numba import simwarp
    simwarp.install()
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        arrays_per_trial = []
        for _ in range(50):
            shared, start = FakeCUDAShared(0), threading.Barrier(64)
            got = [None] * 64

            def lane(i, shared=shared, start=start, got=got):
                start.wait()
                got[i] = shared.array(8, np.float32)
            threads = [threading.Thread(target=lane, args=(i,)) for i in range(64)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            arrays_per_trial.append(len({id(a) for a in got}))
    finally:
        sys.setswitchinterval(before)
    assert arrays_per_trial == [1] * 50
