"""Triton's row configs without a GPU: the rule a run takes where no table holds the row
length and the checker a table's entry must pass (impls/_frameworks/triton/rows.py); the
search behind harness-tune (harness.launch.tuner) over Triton's row config space: which configs it
tries, and how it weighs the large problem against the small ones; the launch plumbing."""
import types

import pytest
import torch

from harness.launch import rowsearch, tuner
from impls._frameworks.triton import launch as triton_launch, occupancy
from impls._frameworks.triton import rows as triton_rows

NEUTRAL = triton_rows.BIT_NEUTRAL


def _choose(table):
    return tuner.choose(table, NEUTRAL)


def _same_bits(a, b):
    return tuner.same_bits(a, b, NEUTRAL)


def _space(key, cols, block, dtype, scratch, bind, options, on_chip=True):
    return triton_rows.space(key, cols, block, on_chip, dtype, None, scratch, bind, options=options)


def _tune_rows(key, cols, block, dtype, scratch, bind, options):
    key = (*key, str(dtype))
    return rowsearch.tune_rows(key, _space(key, cols, block, dtype, scratch, bind, options))


def _for_batch(tuned, key, dtype, batch_rows, scratch, bind, cols=4096, options=triton_rows.ROW_OPTIONS):
    key = (*key, str(dtype))
    return rowsearch.for_batch(tuned, key, batch_rows, _space(key, cols, cols, dtype, scratch, bind, options))


@pytest.mark.parametrize("itemsize", [4, 2])
def test_tile_shapes_keep_8_elements_to_128_bytes_per_thread(itemsize):
    for block in (1, 64, 1024, 4096, 8192, 16384, 32768):
        shapes = triton_rows.tile_shapes(block, on_chip=True, itemsize=itemsize)
        assert shapes and len(set(shapes)) == len(shapes)
        for rows, warps in shapes:
            assert 1 <= warps <= 32 and warps & (warps - 1) == 0
            assert rows == 1 or rows * block <= triton_rows.TILE_ELEMENTS
            per_thread = rows * block / (32 * warps)
            assert per_thread * itemsize <= 128 and (per_thread >= 8 or warps == 1 or warps == 32)


def test_tile_shapes_for_the_sweep_rows():
    assert triton_rows.tile_shapes(4096, True) == [(1, 16), (1, 8), (1, 4), (2, 32), (2, 16), (2, 8)]
    assert triton_rows.tile_shapes(16384, True) == [(1, 32), (1, 16)]
    # 16-bit rows also take 64 elements (128 bytes) per thread: half the warps
    assert triton_rows.tile_shapes(16384, True, itemsize=2) == [(1, 32), (1, 16), (1, 8)]
    assert triton_rows.tile_shapes(4096, True, itemsize=2) == [(1, 16), (1, 8), (1, 4), (1, 2), (2, 32), (2, 16), (2, 8), (2, 4)]
    # one row per step when the row is walked in column tiles, or when asked
    assert {r for r, _ in triton_rows.tile_shapes(4096, on_chip=False)} == {1}
    assert {r for r, _ in triton_rows.tile_shapes(1024, True, max_rows=1)} == {1}
    assert max(r for r, _ in triton_rows.tile_shapes(1024, True)) == 4
    assert max(r for r, _ in triton_rows.tile_shapes(1024, True, max_rows=8)) == 8


def cand(rows, us, small_us, persistent=False, mid_us=20.0):
    return dict(rows=rows, num_warps=8, persistent=persistent, hints="plain", us=us, mid_us=mid_us, small_us=small_us)


def test_choose_prefers_the_large_problem_then_the_small_one():
    # within SMALL_SLACK of the fastest large time, the faster small batch wins
    table = [cand(1, 100.0, 5.0), cand(2, 100.5, 4.0), cand(4, 99.8, 6.0)]
    assert _choose(table)["rows"] == 2
    # a small-batch gain never buys more than SMALL_SLACK of large-problem time
    table = [cand(1, 100.0, 5.0), cand(2, 102.0, 1.0)]
    assert _choose(table)["rows"] == 1
    # small-batch times within SMALL_TIE are a tie: the large problem decides (H200, softmax
    # 16384x8192 bf16: 16 warps 129.06 us / 5.34 us at 16 rows, 8 warps 129.89 / 5.31)
    table = [cand(1, 129.89, 5.31), cand(2, 129.06, 5.34), cand(4, 129.86, 5.41)]
    assert _choose(table)["rows"] == 2
    table = [cand(1, 129.89, 5.31), cand(2, 129.06, 5.38)]   # 1.3% apart: the small batch decides
    assert _choose(table)["rows"] == 1


def test_choose_weighs_the_mid_batch_beside_the_small_one():
    """On the H200 (LayerNorm fp32, 4096 columns) bits 2.5% behind on 16 rows but 3.9% ahead
    on 2048 fall least short over both batches; the large problem still bounds the choice."""
    table = [cand(1, 126.06, 5.28, mid_us=18.78), cand(2, 127.14, 5.15, mid_us=19.52)]
    assert _choose(table)["rows"] == 1
    table = [cand(1, 126.06, 5.28, mid_us=18.78), cand(2, 127.14, 5.15, mid_us=18.90)]   # 0.6% on 2048 rows
    assert _choose(table)["rows"] == 2
    table = [cand(1, 129.0, 5.28, mid_us=18.78), cand(2, 127.14, 5.15, mid_us=19.52)]   # 1.5% behind on the large
    assert _choose(table)["rows"] == 2


def test_choose_skips_configs_that_did_not_run_and_says_when_none_did():
    assert _choose([cand(1, None, None), cand(2, 100.0, 5.0)])["rows"] == 2
    with pytest.raises(RuntimeError, match="no row config ran"):
        _choose([cand(1, None, 3.0)])


def test_the_interpreter_takes_the_tallest_tile(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    config = triton_rows.row_choice(("test", "-"), 781, 781, 1024, True, torch.float32, None, None, None,
                                    options=triton_rows.ROW_OPTIONS)
    assert config == dict(rows=4, num_warps=16, persistent=True, hints="plain", prefetch=True, early=True,
                          ordered=False, loop_block=0, source="interpreter")


# Every switch a table may hold on the GPU, forced one combination at a time under the
# interpreter (the interpreter itself would always take the same one), through the
# harness's checks against the float64 reference: ragged rows, masked columns, a last tile
# with fewer rows than ROWS, and the adversarial inputs. The looped path's tile (loop_block;
# 2048 or 4096 on the GPU, offered for rows at least twice that long) is 256 here: 781
# columns walk three whole tiles and a ragged one, 512 columns two whole ones; a narrower
# tile walks the same code more times, each a Python step of the interpreter.
SWITCHES = [dict(rows=1, persistent=False, prefetch=False, early=False, ordered=False, loop_block=0),
            dict(rows=4, persistent=True, prefetch=True, early=False, ordered=False, loop_block=0),
            dict(rows=2, persistent=False, prefetch=False, early=True, ordered=False, loop_block=0),
            dict(rows=1, persistent=True, prefetch=True, early=True, ordered=False, loop_block=0),
            dict(rows=2, persistent=False, prefetch=False, early=False, ordered=True, loop_block=0),
            dict(rows=4, persistent=True, prefetch=False, early=False, ordered=True, loop_block=0),
            dict(rows=1, persistent=True, prefetch=False, early=False, ordered=False, loop_block=256),
            dict(rows=1, persistent=False, prefetch=False, early=True, ordered=False, loop_block=256),
            dict(rows=1, persistent=False, prefetch=False, early=False, ordered=True, loop_block=256),
            # early, the row's loads masked on its length though it fills its block (5x512)
            dict(rows=1, persistent=False, prefetch=False, early=True, ordered=False, loop_block=0, predicated=True)]


def _forced(monkeypatch, config: dict) -> None:
    """Every Triton row kernel bound from here on under the interpreter runs ``config``."""
    monkeypatch.setattr(triton_rows, "interpreted_config", lambda *args: dict(config))


def _run_forced(cpu_runner, monkeypatch, op: str, variant: str, config: dict) -> list:
    """Run a Triton row op under the interpreter with ``config`` forced, at a ragged shape
    (masked columns, a last tile short of rows) and a small one, through the harness's
    checks; each record must pass. Returns the records."""
    from harness.run.runner import CaseSpec
    from harness.registry import frameworks
    frameworks()["triton"].prepare(cpu_runner.device)
    _forced(monkeypatch, config)
    records = []
    # 5x512: a row that fills its block. LayerNorm's large_mean draws at least 128 rows below
    # 512 columns and 16 from there: 5x256 cost the interpreter 32768 elements per launch.
    for shape in ((9, 781), (5, 512)):
        rec = cpu_runner.run(CaseSpec(op, "triton", variant, "bfloat16", shape))
        assert rec.status == "ok" and rec.passed, f"{shape}: {rec.status}: {rec.reason}\n{rec.traceback}"
        records.append(rec)
    return records


@pytest.mark.parametrize("switches", SWITCHES, ids=lambda s: "-".join(f"{k}{int(v)}" for k, v in s.items()))
@pytest.mark.parametrize("op,variant", [("rmsnorm", "tuned"), ("layernorm", "welford"), ("layernorm", "two_pass"),
                                        ("rmsnorm_silu_mul_add", "fused")])
def test_every_row_switch_matches_the_reference(cpu_runner, monkeypatch, op, variant, switches):
    for rec in _run_forced(cpu_runner, monkeypatch, op, variant, dict(num_warps=4, hints="plain", **switches)):
        assert {k: rec.impl_config[k] for k in switches} == switches


@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("variant,code", [("on_chip", 0), ("online", 1), ("three_pass", 2)])
def test_softmax_on_either_grid_matches_the_reference(cpu_runner, monkeypatch, variant, code, persistent):
    """One program per row (no loop in the kernel: triton.device, one_tile) and a persistent grid
    walking the rows, forced under the interpreter (which itself always takes the
    persistent one), through the harness's checks."""
    config = dict(rows=1, num_warps=4, hints="plain", persistent=persistent)
    for rec in _run_forced(cpu_runner, monkeypatch, "softmax", variant, config):
        assert rec.impl_config["persistent"] is persistent


class _Fp16:
    itemsize = 2


def _small(tuned):
    """The config a 16-row batch takes, None where that is the large problem's."""
    cfg = tuned.for_rows(tuner.SMALL_ROWS)
    return None if cfg == tuned.config else tuner.config_of({k: v for k, v in cfg.items() if k != "tuned_for_rows"})


def _warps_a_row(cfg):
    """Stand-in bits of a row config: each row reduced over num_warps // rows warps."""
    return f"{cfg['num_warps'] // cfg['rows']} warps a row"


def _writing(bits):
    """(scratch, bind) of stand-in launches: a launch of cfg "writes" bits(cfg) into the
    output that the tuner's digest (patched to read it) takes, on 32 registers a row of
    its tile (as bound_launch keeps ptxas's count)."""
    def scratch(rows):
        return rows, [None]   # the "output": what the last launch wrote

    def bind(cfg, args, rows):
        def launch():
            args[-1][0] = bits(cfg)
            return cfg, rows
        launch.registers = 32 * cfg["rows"]
        return launch
    return scratch, bind


def _recording(fake_time, timed):
    """A stand-in for tuner.measure: fake_time(cfg, rows), each problem's rows noted in ``timed``."""
    def measure(run, *timing):
        cfg, rows = run()
        timed.append(rows)
        return fake_time(cfg, rows)
    return measure


def _tune_with_stand_in_times(monkeypatch, cols, fake_time, options, measure=None, bits=None):
    """tune_rows as on a GPU for 16-bit rows of ``cols`` fitting on chip, each candidate
    timed by ``fake_time(cfg, rows)`` instead of the CUDA timer (rows: the problem's), or
    by ``measure(run, samples)`` in place of tuner.measure when given. With
    ``bits(cfg)``: what a launch of cfg "writes", the digest the tuner takes of the
    large problem's output; without, no output to digest (configs decide same_bits)."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(tuner, "measure", measure or (lambda run, *timing: fake_time(*run())))
    scratch, bind = (lambda rows: rows), (lambda cfg, args, rows: lambda: (cfg, rows))
    if bits:
        monkeypatch.setattr(tuner, "digest", lambda args: args[-1][0])
        scratch, bind = _writing(bits)
    try:
        return _tune_rows(("stand-in", cols), cols, cols, _Fp16, scratch, bind, options)
    finally:
        tuner.choices.pop(("stand-in", cols, str(_Fp16)), None)


def test_the_gpu_tuning_path_with_a_stand_in_timer(monkeypatch):
    """tune_rows as on a GPU (stage 1 shapes and looped tiles, then the switches), with
    times from a stand-in for the CUDA timer: which candidates it builds and what it keeps."""
    def fake_time(cfg, rows):
        fast = cfg.get("loop_block") == 2048 and cfg["num_warps"] == 8
        return (100.0 if fast else 110.0) * (1.02 if cfg.get("persistent") else 1.0)

    tuned = _tune_with_stand_in_times(monkeypatch, 8192, fake_time, triton_rows.ROW_OPTIONS)
    assert tuned.config["loop_block"] == 2048 and tuned.config["num_warps"] == 8
    looped = [c for c in tuned.table["candidates"] if c["loop_block"]]
    assert {(c["loop_block"], c["num_warps"]) for c in looped} >= {(2048, 8), (2048, 16), (4096, 8), (4096, 16)}
    # no register cap and no second read of x among the candidates: neither is a switch
    assert not any({"maxnreg", "reload"} & set(c) for c in tuned.table["candidates"])
    # the on-chip switches are not tried on a looped config; the grid and the hints are
    assert not any(c["prefetch"] or c["early"] for c in looped)
    assert any(c["persistent"] for c in looped) and any(c["hints"] == "stream" for c in looped)
    assert tuned.table["problems"] == {"us": f"{(256 << 20) // (8192 * 2)}x8192", "mid_us": "2048x8192",
                                       "small_us": "16x8192"}


def test_the_tuning_table_keeps_each_candidate_s_register_count(monkeypatch):
    """ptxas's count per thread, as the compiled kernel was loaded (bound_launch keeps it):
    how many programs share an SM. In the table, never in the config to launch."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)

    def bind(cfg, args, rows):
        def launch():
            return cfg, rows
        launch.registers = 24 + 8 * cfg["rows"]   # as bound_launch sets it after the first launch
        return launch

    monkeypatch.setattr(tuner, "measure", lambda run, *timing: 100.0 / run()[0]["rows"])
    try:
        tuned = _tune_rows(("stand-in", 4096), 4096, 4096, torch.float32, lambda rows: rows, bind,
                           triton_rows.ROW_OPTIONS)
    finally:
        tuner.choices.pop(("stand-in", 4096, "torch.float32"), None)
    assert all(c["regs"] == 24 + 8 * c["rows"] for c in tuned.table["candidates"])
    assert "regs" not in tuned.config and tuned.config["rows"] == 2


def test_a_looped_config_tries_early_operands_where_the_kernel_has_them(monkeypatch):
    """A looped best config gets the EARLY switch tried only from a kernel that declares
    "looped_early"; and a small batch may take it (same bits)."""
    def fake_time(cfg, rows):
        if rows == tuner.SMALL_ROWS:
            return 4.0 if cfg["early"] else 6.0
        return (100.0 if cfg.get("loop_block") == 2048 else 120.0) * (1.05 if cfg["early"] else 1.0)

    for options, tried in ((triton_rows.ROW_OPTIONS, False), ((*triton_rows.ROW_OPTIONS, "looped_early"), True)):
        tuned = _tune_with_stand_in_times(monkeypatch, 4096, fake_time, options)
        assert tuned.config["loop_block"] == 2048 and not tuned.config["early"]
        assert any(c["loop_block"] and c["early"] for c in tuned.table["candidates"]) == tried
        assert (_small(tuned) is not None and _small(tuned)["early"] and _small(tuned)["loop_block"] == 2048) == tried


def test_a_latency_bound_batch_takes_the_same_bits_config_fastest_on_16_rows(monkeypatch):
    """Early weights win the small batch but lose 5% on the large problem: the large
    problem keeps late weights, a batch of one wave takes early ones. A config with other
    bits (another tile shape) is never taken for the small batch, however fast."""
    def fake_time(cfg, rows):
        if rows == tuner.SMALL_ROWS:
            return 3.0 if (cfg["rows"], cfg["num_warps"]) == (1, 4) else 5.0 if cfg["early"] else 6.0
        return (100.0 if (cfg["rows"], cfg["num_warps"]) == (2, 8) else 120.0) * (1.05 if cfg["early"] else 1.0)

    tuned = _tune_with_stand_in_times(monkeypatch, 4096, fake_time, triton_rows.ROW_OPTIONS)
    assert (tuned.config["rows"], tuned.config["num_warps"], tuned.config["early"]) == (2, 8, False)
    assert _small(tuned) is not None and _small(tuned)["early"]
    assert all(_small(tuned)[k] == v for k, v in tuned.config.items() if k not in NEUTRAL)
    # each batch takes the config of the problem nearest it in rows (log scale): 16, 2048, 32768
    assert tuned.batches == [[32768, None], [2048, None], [16, _small(tuned)]]
    assert all(tuned.for_rows(n) == {**_small(tuned), "tuned_for_rows": 16} for n in (1, 16, 150))
    assert all(tuned.for_rows(n) == tuned.config for n in (200, 2048, 10 ** 6))
    # every switch of the on-chip path was tried on the chosen tile shape
    tried = [c for c in tuned.table["candidates"] if (c["rows"], c["num_warps"]) == (2, 8)]
    assert {s for c in tried for s in ("persistent", "prefetch", "early") if c[s]} == {"persistent", "prefetch", "early"}


def test_a_row_launcher_works_out_its_grid_and_arguments_once(monkeypatch):
    """What row_launcher hands the kernel: one program per tile (or a persistent grid),
    only the switches the kernel has, the looped path's BLOCK and static SPAN; and the
    same launch every call, with nothing recomputed."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")   # every launch dispatches: each is recorded
    class Kernel:
        arg_names = ["x", "rows", "programs", "ROWS", "BLOCK", "ON_CHIP", "EVEN", "PREFETCH", "SPAN",
                     "PERSISTENT", "LOAD", "STORE"]

        def __init__(self):
            self.grids, self.calls = [], []

        def __getitem__(self, grid):
            self.grids.append(grid)
            return lambda *args, **kwargs: self.calls.append((args, kwargs))

    k = Kernel()
    cfg = dict(rows=2, num_warps=8, persistent=False, hints="stream", prefetch=True, early=True, loop_block=0)
    launch = triton_rows.row_launcher(k, cfg, 37, None, "x", 37, BLOCK=1024, ON_CHIP=True, EVEN=False)
    launch()
    launch()
    assert k.grids == [(19,)] and k.calls[0] == k.calls[1]
    args, kwargs = k.calls[0]
    assert args == ("x", 37, 19)
    assert kwargs == dict(ROWS=2, num_warps=8, LOAD="evict_first", STORE=".cs", PREFETCH=True, BLOCK=1024,
                          ON_CHIP=True, EVEN=False, SPAN=0, PERSISTENT=False)   # no EARLY: this kernel has none
    looped = triton_rows.row_launcher(k, {**cfg, "rows": 1, "persistent": True, "loop_block": 256}, 37, None, "x", 37,
                             BLOCK=1024, ON_CHIP=True, EVEN=False)
    looped()
    assert k.grids[-1] == (min(37, occupancy.INTERPRETED_PER_SM * triton_launch.sm_count(None)),)
    assert {key: k.calls[-1][1][key] for key in ("BLOCK", "ON_CHIP", "EVEN", "SPAN", "PERSISTENT")} == \
        dict(BLOCK=256, ON_CHIP=False, EVEN=False, SPAN=1024, PERSISTENT=True)
    # a predicated row fills its block yet takes the masked path
    triton_rows.row_launcher(k, cfg, 37, None, "x", 37, BLOCK=1024, ON_CHIP=True, EVEN=True)()
    assert k.calls[-1][1]["EVEN"] is True
    triton_rows.row_launcher(k, {**cfg, "predicated": True}, 37, None, "x", 37, BLOCK=1024, ON_CHIP=True, EVEN=True)()
    assert k.calls[-1][1]["EVEN"] is False



def test_a_persistent_grid_is_what_the_gpu_runs_at_once(monkeypatch):
    """A persistent launch gets as many programs as its compiled kernel runs at once on
    every SM (the driver's count, stood in for here), at most one per tile; the count is
    asked of the binary compiled for that very grid size (Triton specialises on it), and
    the grid only shrinks until its own binary fits it."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(occupancy, "sm_count", lambda device: 132)
    monkeypatch.setattr(occupancy, "threads_per_sm", lambda device: 2048)
    # a binary compiled for a grid divisible by 16 on more registers: 4 programs per SM, else 5
    monkeypatch.setattr(occupancy, "programs_per_sm", lambda compiled: 4 if compiled % 16 == 0 else 5)

    class Kernel:
        def __init__(self):
            self.compiled_for = []

        def warmup(self, *args, grid, **kwargs):
            self.compiled_for.append(args[-1])
            assert grid == (args[-1],) and kwargs["num_warps"] == 8
            return args[-1]

    k = Kernel()
    # 8 warps: the threads allow 8 per SM (1056 programs); that binary fits 4 (528, also
    # divisible by 16): 528 fits
    assert occupancy.persistent_programs(k, 10 ** 6, None, ("x",), {"num_warps": 8}) == 528
    assert k.compiled_for == [1056, 528]
    k = Kernel()
    assert occupancy.persistent_programs(k, 300, None, ("x",), {"num_warps": 8}) == 300   # 300: 5 per SM fit
    assert k.compiled_for == [300]
    monkeypatch.setattr(occupancy, "programs_per_sm", lambda compiled: 3 if compiled % 16 else 4)
    k = Kernel()   # 1056 -> 528 (fits 4: 528) done; never grows past what the threads allow
    assert occupancy.persistent_programs(k, 10 ** 6, None, ("x",), {"num_warps": 8}) == 528
    monkeypatch.setattr(occupancy, "programs_per_sm", lambda compiled: 5 if compiled % 16 else 3)
    k = Kernel()   # 1056 fits 3 -> 396 (not divisible by 16) fits 5: 396
    assert occupancy.persistent_programs(k, 10 ** 6, None, ("x",), {"num_warps": 8}) == 396
    assert k.compiled_for == [1056, 396]


class _Compiled:
    """A stand-in compiled kernel: its launcher records the full argument list."""

    def __init__(self):
        self.direct = []
        self.n_regs = 40   # what ptxas gave it, known once it is loaded (CompiledKernel)

    def __getitem__(self, grid):
        x, y, z = grid   # Triton 3.6's CompiledKernel reads grid[0], grid[1], grid[2]
        return lambda *full: self.direct.append((grid, full))


class _Jit:
    """A stand-in JIT kernel: its dispatch records the call and returns the compiled kernel."""

    def __init__(self, fn):
        self.fn, self.dispatched, self.compiled = fn, [], _Compiled()

    def __getitem__(self, grid):
        def dispatch(*args, **kwargs):
            self.dispatched.append((grid, args, kwargs))
            return self.compiled
        return dispatch


def test_a_bound_launch_dispatches_once_then_calls_the_compiled_kernel(monkeypatch):
    """On a GPU the first launch compiles through Triton's dispatch; every later one hands
    the compiled kernel's launcher every parameter in the signature's order (constexprs and
    defaults included, options such as num_warps not), the same tuple each time."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)

    def kernel(x_ptr, n, programs, BLOCK, LOAD="", STORE=""):
        pass

    k = _Jit(kernel)
    launch = triton_launch.bound_launch(k, (7,), "x", 100, 7, BLOCK=256, STORE=".cs", num_warps=4)
    for _ in range(3):
        launch()
    assert k.dispatched == [((7,), ("x", 100, 7), dict(BLOCK=256, STORE=".cs", num_warps=4))]
    assert k.compiled.direct == [((7, 1, 1), ("x", 100, 7, 256, "", ".cs"))] * 2
    assert launch.registers == 40   # kept in the tuning table (regs)


def test_under_the_interpreter_every_launch_dispatches(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")

    def kernel(x_ptr, BLOCK):
        pass

    k = _Jit(kernel)
    launch = triton_launch.bound_launch(k, (2,), "x", BLOCK=64)
    launch()
    launch()
    assert len(k.dispatched) == 2 and not k.compiled.direct


def test_kernel_args_names_what_is_missing_or_too_many():
    def kernel(a, b, C, D=3):
        pass

    k = _Jit(kernel)
    assert triton_launch.kernel_args(k, (1,), dict(b=2, C=5, num_warps=8)) == (1, 2, 5, 3)
    with pytest.raises(TypeError, match="kernel: no value for C"):
        triton_launch.kernel_args(k, (1, 2), {})
    with pytest.raises(TypeError, match="takes 4 arguments, got 5"):
        triton_launch.kernel_args(k, (1, 2, 3, 4, 5), {})


def test_a_shape_is_chosen_for_what_a_small_batch_of_its_bits_can_do(monkeypatch):
    """Two shapes within SMALL_SLACK on the large problem: kept is the one whose small batch
    runs faster once it may load its operands early (same bits), though without that
    switch the other is faster on both problems (as LayerNorm's are at 4096 columns)."""
    def fake_time(cfg, rows):
        shape = (cfg["rows"], cfg["num_warps"])
        if rows == tuner.SMALL_ROWS:
            return {(1, 2): 5.3 if cfg["early"] else 6.0, (1, 8): 5.0 if cfg["early"] else 6.4}.get(shape, 7.0)
        return {(1, 2): 100.0, (1, 8): 100.5}.get(shape, 120.0) * (1.04 if cfg["early"] else 1.0)

    tuned = _tune_with_stand_in_times(monkeypatch, 4096, fake_time, triton_rows.ROW_OPTIONS)
    assert (tuned.config["rows"], tuned.config["num_warps"]) == (1, 8) and not tuned.config["early"]
    assert _small(tuned)["early"] and _same_bits(_small(tuned), tuned.config)
    # both eligible shapes were measured with the small-batch switch, the slow ones not
    early = {(c["rows"], c["num_warps"]) for c in tuned.table["candidates"] if c["early"]}
    assert early == {(1, 2), (1, 8)}


def test_each_small_batch_toggle_is_measured_on_its_own_and_the_fastest_serves(monkeypatch):
    """EARLY and ORDERED are measured apart on every eligible shape (ORDERED takes the
    place of EARLY's loads, so never both); the small batch takes ORDERED where it is
    fastest, the large problem keeps its plain config. A kernel without ORDERED among its
    options is never given it."""
    def fake_time(cfg, rows):
        shape = (cfg["rows"], cfg["num_warps"])
        if rows == tuner.SMALL_ROWS:
            return {(1, 2): 6.0, (1, 8): 6.4}.get(shape, 7.0) - (0.5 if cfg["early"] else 0.0) \
                - (0.9 if cfg.get("ordered") else 0.0)
        return {(1, 2): 100.0, (1, 8): 100.5}.get(shape, 120.0) * (1.04 if cfg["early"] or cfg.get("ordered") else 1.0)

    tuned = _tune_with_stand_in_times(monkeypatch, 4096, fake_time, triton_rows.ROW_OPTIONS)
    assert (tuned.config["rows"], tuned.config["num_warps"]) == (1, 2)
    assert not (tuned.config["early"] or tuned.config["ordered"])
    assert _small(tuned)["ordered"] and not _small(tuned)["early"] and _same_bits(_small(tuned), tuned.config)
    candidates = tuned.table["candidates"]
    for switch in ("early", "ordered"):
        assert {(c["rows"], c["num_warps"]) for c in candidates if c[switch]} == {(1, 2), (1, 8)}
    assert not any(c["early"] and c["ordered"] for c in candidates)
    without = _tune_with_stand_in_times(monkeypatch, 4096, fake_time, ("prefetch", "early", "looped"))
    assert not any(c.get("ordered") for c in without.table["candidates"]) and _small(without)["early"]


def test_same_bits_is_measured_where_both_wrote_and_else_only_bit_neutral_switches_differ():
    cfg = dict(rows=1, num_warps=8, persistent=False, hints="plain", early=False, loop_block=0)
    assert _same_bits(cfg, {**cfg, "early": True, "persistent": True, "hints": "stream", "us": 3.0})
    assert not _same_bits(cfg, {**cfg, "num_warps": 16})
    assert not _same_bits(cfg, {**cfg, "loop_block": 2048})
    assert not _same_bits(cfg, {**cfg, "num_warps": 16, "bits": "a"})   # one side unmeasured
    two_rows = {**cfg, "rows": 2, "num_warps": 16}
    assert _same_bits({**cfg, "bits": "a"}, {**two_rows, "bits": "a"})
    assert not _same_bits({**cfg, "bits": "a"}, {**cfg, "persistent": True, "bits": "b"})


def test_another_tile_shape_that_writes_the_same_bits_may_serve_the_small_batch(monkeypatch):
    """2-row tiles on 8 warps win the large problem; 1-row tiles on 4 warps write the same
    bits (each row over 4 warps either way, in this stand-in) and, loading early, run 16
    rows fastest: the small batch takes them. Shapes of other bits are not tried early."""
    def fake_time(cfg, rows):
        shape = (cfg["rows"], cfg["num_warps"])
        if rows == tuner.SMALL_ROWS:
            return {(1, 4): 4.0, (2, 8): 5.0}.get(shape, 6.0) if cfg["early"] else 6.0
        return {(2, 8): 100.0, (1, 4): 104.0}.get(shape, 120.0) * (1.05 if cfg["early"] else 1.0)

    tuned = _tune_with_stand_in_times(monkeypatch, 4096, fake_time, triton_rows.ROW_OPTIONS,
                                      bits=_warps_a_row)
    assert (tuned.config["rows"], tuned.config["num_warps"], tuned.config["early"]) == (2, 8, False)
    assert (_small(tuned)["rows"], _small(tuned)["num_warps"], _small(tuned)["early"]) == (1, 4, True)
    early = {(c["rows"], c["num_warps"]) for c in tuned.table["candidates"] if c["early"]}
    assert early == {(2, 8), (1, 4)}
    assert all(c["bits"] for c in tuned.table["candidates"]) and "bit_neutral_changed_bits" not in tuned.table
    assert tuned.for_rows(4)["tuned_for_rows"] == 16 and tuned.for_rows(4096) == tuned.config


def test_a_neutral_switch_that_changes_the_bits_is_reported_and_not_trusted(monkeypatch):
    """If a persistent grid wrote other bits than one program per tile (a kernel bug), the
    table says so, and a small batch never takes it for the large config's bits."""
    def fake_time(cfg, rows):
        if rows == tuner.SMALL_ROWS:
            return 3.0 if cfg["persistent"] else 6.0
        return 100.0 if (cfg["rows"], cfg["num_warps"]) == (1, 8) and not cfg["persistent"] else 120.0

    tuned = _tune_with_stand_in_times(monkeypatch, 4096, fake_time, triton_rows.ROW_OPTIONS,
                                      bits=lambda cfg: f"{cfg['rows']}x{cfg['num_warps']} {cfg['persistent']}")
    assert (tuned.config["rows"], tuned.config["num_warps"], tuned.config["persistent"]) == (1, 8, False)
    assert _small(tuned) is None or not _small(tuned)["persistent"]
    broken = tuned.table["bit_neutral_changed_bits"]
    assert broken and all({a["persistent"], b["persistent"]} == {False, True} for a, b in broken)


def test_the_digest_of_an_output_changes_with_any_element():
    import torch
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        out = torch.randn(37, 781).to(dtype)
        same = tuner.digest((None, out.clone()))
        assert same == tuner.digest((None, out)) and len(same) == 16
        nudged = out.clone()
        nudged.view(-1).view(torch.int16 if dtype.itemsize == 2 else torch.int32)[1000] += 1   # one ulp
        swapped = out.clone()
        swapped[0, :2] = out[0, :2].flip(0)
        assert tuner.digest((out, nudged)) != same and tuner.digest((out, swapped)) != same
    assert tuner.digest(16) is None and tuner.digest(()) is None


def test_the_small_batches_are_timed_with_more_samples(monkeypatch):
    seen = set()

    def fake_time(cfg, rows):
        return 100.0 if rows > tuner.SMALL_ROWS else 5.0

    def measure(run, samples, seconds, unrunnable=()):
        cfg, rows = run()
        seen.add((rows, samples))
        return fake_time(cfg, rows)

    _tune_with_stand_in_times(monkeypatch, 4096, fake_time, triton_rows.ROW_OPTIONS, measure=measure)
    work = tuner.effort()
    assert seen == {(tuner.SMALL_ROWS, work.small_samples), (tuner.MID_ROWS, work.small_samples),
                    ((256 << 20) // (4096 * 2), work.large_samples)}
    assert work.small_samples > work.large_samples


def test_a_batch_of_a_few_waves_takes_the_config_of_its_bits_fastest_on_2048_rows(monkeypatch):
    """Early weights win 2048 rows but lose the large problem: a batch nearer 2048 rows
    than 16 or the large problem takes them, with the large config's bits."""
    def fake_time(cfg, rows):
        if rows == tuner.MID_ROWS:
            return 8.0 if cfg["early"] and not cfg["persistent"] else 9.0
        return (100.0 if (cfg["rows"], cfg["num_warps"]) == (2, 8) else 120.0) * (1.05 if cfg["early"] else 1.0)

    tuned = _tune_with_stand_in_times(monkeypatch, 4096, fake_time, triton_rows.ROW_OPTIONS, bits=_warps_a_row)
    mid = tuned.for_rows(1823)
    assert mid["tuned_for_rows"] == tuner.MID_ROWS and mid["early"] and not tuned.config["early"]
    assert _warps_a_row(mid) == _warps_a_row(tuned.config) and tuned.for_rows(20000) == tuned.config


def test_the_greedy_path_is_not_led_by_a_small_batch_switch(monkeypatch):
    """EARLY, measured for the small batch, can also be fastest on LayerNorm's large
    problem; a path led by it would try a persistent prefetching grid only with EARLY on,
    where it is slow, and never without it, where it is fastest."""
    def fake_time(cfg, rows):
        if rows == tuner.SMALL_ROWS:
            return 5.0
        if (cfg["rows"], cfg["num_warps"], cfg.get("loop_block")) != (1, 8, 0):
            return 200.0
        if cfg["early"]:
            return 170.0 if cfg["persistent"] else 95.0
        return 90.0 if cfg["persistent"] and cfg["prefetch"] else 100.0

    tuned = _tune_with_stand_in_times(monkeypatch, 4096, fake_time, triton_rows.ROW_OPTIONS)
    assert tuned.config["persistent"] and tuned.config["prefetch"] and not tuned.config["early"]


def test_only_a_row_shorter_than_its_block_is_compiled_for_its_length():
    """static_cols: 781 columns in a block of 1024 are compiled for their length (masks
    that fold); a row filling its block, or walked in column tiles (40000 in 4096s, 8192
    in 2048s), keeps the kernel compiled for any length, the one its configs were tuned
    and measured with."""
    assert triton_rows.static_cols(781, 1024) == 781 and triton_rows.static_cols(7, 8) == 7
    assert triton_rows.static_cols(4096, 4096) == 0 and triton_rows.static_cols(8192, 2048) == 0 and triton_rows.static_cols(1, 1) == 0
    assert triton_rows.static_cols(40000, 4096) == 0


def _tuned_then_a_batch(monkeypatch, batch_rows, batch_time, timed, other_bits):
    """tune_rows on stand-in times (2x8 fastest on the large and 2048-row problems, so
    chosen; ``batch_time(cfg, shape)`` on a batch of ``batch_rows``; each timed problem's
    rows noted in ``timed``), then for_batch's stand-ins, in which a persistent grid writes
    ``other_bits`` (a neutral switch gone wrong on that batch). Returns (tuned, scratch, bind)."""
    def fake_time(cfg, rows):
        shape = (cfg["rows"], cfg["num_warps"])
        if rows == batch_rows:
            return batch_time(cfg, shape)
        if rows == tuner.MID_ROWS:
            return 8.8 if shape == (2, 8) else 9.1
        return 100.0 if shape == (2, 8) else 104.0 if shape == (1, 4) else 120.0

    tuned = _tune_with_stand_in_times(monkeypatch, 4096, fake_time, triton_rows.ROW_OPTIONS,
                                      measure=_recording(fake_time, timed), bits=_warps_a_row)
    assert (tuned.config["rows"], tuned.config["num_warps"]) == (2, 8)
    scratch, bind = _writing(lambda cfg: other_bits if cfg["persistent"] else _warps_a_row(cfg))
    monkeypatch.setattr(tuner, "digest", lambda args: args[-1][0])
    monkeypatch.setattr(rowsearch, "_batch_choices", {})
    timed.clear()
    return tuned, scratch, bind


def test_a_batch_between_the_problems_takes_its_own_fastest_config_of_the_chosen_bits(monkeypatch):
    """On the H200 (LayerNorm fp32 1823x781) the config of the chosen bits fastest on 2048
    rows ran 1823 rows slower than another of the same bits (a wave's edge). A batch that
    is none of the problems, and smaller than half the large one, is measured itself among
    the configs of the chosen bits; a faster config of other bits, or one that writes other
    bits on the batch, never serves it. The record's table shows the measurement; a tuning
    problem's batch and a large batch take the tuned configs unmeasured."""
    def batch_time(cfg, shape):   # 1x4 (same bits) fastest, 1x8 (other bits) and a
        # persistent grid (other bits on this batch) faster still
        return 6.0 if cfg["persistent"] else {(1, 4): 7.9, (1, 8): 7.0}.get(shape, 8.7)

    timed = []
    tuned, scratch, bind = _tuned_then_a_batch(monkeypatch, 1823, batch_time, timed, "other bits here")
    cfg, batch = _for_batch(tuned, ("stand-in", 4096), _Fp16, 1823, scratch, bind)
    assert (cfg["rows"], cfg["num_warps"], cfg["tuned_for_rows"]) == (1, 4, 1823)
    assert _warps_a_row(cfg) == _warps_a_row(tuned.config) and set(timed) == {1823}
    assert batch["rows"] == 1823
    assert all(m["regs"] == 32 * m["rows"] for m in batch["candidates"]) and "regs" not in cfg
    assert tuner.config_of(batch["candidates"][0]) == tuned.config   # the chosen config, timed first
    assert {(c["rows"], c["num_warps"]) for c in batch["candidates"]} == {(2, 8), (1, 4)}
    assert any(c["persistent"] and c["bits"] == "other bits here" for c in batch["candidates"])
    # measured once per process
    timed.clear()
    assert _for_batch(tuned, ("stand-in", 4096), _Fp16, 1823, scratch, bind)[0] == cfg and not timed
    # a tuning problem's batch, and one from half the large problem's rows to its size: unmeasured
    large = tuned.batches[0][0]
    for rows in (tuner.SMALL_ROWS, tuner.MID_ROWS, large // 2, large - 1, large):
        assert _for_batch(tuned, ("stand-in", 4096), _Fp16, rows, scratch, bind) == (tuned.for_rows(rows), {})
    assert not timed


def test_a_batch_larger_than_the_large_problem_is_measured_itself(monkeypatch):
    """On the H200 (LayerNorm fp32, 4096 columns) the large problem (16384 rows) ranked two
    configs of the chosen bits 0.1% apart, and 32768 rows, taking its choice, ran 256.10 us
    where the other config ran 250.88. A batch beyond the large problem times the chosen bits'
    configs on its own size and takes the fastest of them there, never one of other bits."""
    twice = 2 * (tuner.SCRATCH_BYTES // (4096 * _Fp16.itemsize))

    def batch_time(cfg, shape):   # 1x4 (the same bits as the chosen 2x8) fastest; 1x8 (other bits) faster still
        return 180.0 if shape == (1, 8) else 190.0 if shape == (1, 4) else 200.0

    timed = []
    tuned, scratch, bind = _tuned_then_a_batch(monkeypatch, twice, batch_time, timed, "other bits")
    assert tuned.batches[0][0] == twice // 2
    cfg, batch = _for_batch(tuned, ("stand-in", 4096), _Fp16, twice, scratch, bind)
    assert (cfg["rows"], cfg["num_warps"], cfg["tuned_for_rows"]) == (1, 4, twice)
    assert set(timed) == {twice} and batch["rows"] == twice
    assert _warps_a_row(cfg) == _warps_a_row(tuned.config)


def test_a_batch_tries_the_other_cache_hints_and_grid_on_its_fastest_config(monkeypatch):
    """The tuner tried streaming hints and a persistent grid on its greedy path's config
    only; a batch tries them on the fastest config of its family (BATCH_TOGGLES), each
    from the best so far, and takes one where it is faster and writes the same bits."""
    def batch_time(cfg, shape):   # 1x4 fastest of the family, faster still streaming
        return {(1, 4): 7.5 if cfg["hints"] == "stream" else 7.9}.get(shape, 8.7) - 0.1 * cfg["persistent"]

    # a persistent grid writes other bits on this batch: faster, yet refused
    tuned, scratch, bind = _tuned_then_a_batch(monkeypatch, 4096, batch_time, [], "other bits")
    assert not any(c["hints"] == "stream" and (c["rows"], c["num_warps"]) == (1, 4) for c in tuned.table["candidates"])
    cfg, batch = _for_batch(tuned, ("stand-in", 4096), _Fp16, 4096, scratch, bind)
    assert (cfg["rows"], cfg["num_warps"], cfg["hints"], cfg["persistent"]) == (1, 4, "stream", False)
    tried = [(c["rows"], c["num_warps"], c["hints"], c["persistent"]) for c in batch["candidates"]]
    configs = [tuple(sorted(tuner.config_of(c).items())) for c in batch["candidates"]]
    assert (1, 4, "stream", True) in tried and len(configs) == len(set(configs))   # each timed once
    # a persistent prefetching config's other grids: one program per tile, prefetching
    # nothing, and persistent without prefetching; a kernel without PREFETCH never gets it
    grids = triton_rows.other_grids
    assert grids({"persistent": True, "prefetch": True}) == [{"persistent": False, "prefetch": False},
                                                             {"prefetch": False}]
    assert grids({"persistent": False, "prefetch": False}) == [{"persistent": True},
                                                               {"persistent": True, "prefetch": True}]
    assert grids({"persistent": False}) == [{"persistent": True}]
    assert grids({"persistent": True}) == [{"persistent": False}]


def test_an_on_chip_row_folds_only_where_each_thread_holds_both_halves():
    """fold_width: an on-chip row longer than ROW_FOLD folds its sums where the layout's
    repeat (16-byte runs x 32 lanes x warps) divides ROW_FOLD, so that the fold is register
    adds (fp32 4096 on 8 or 16 warps); not bf16 on 16 warps (its fold crossed warps through
    shared memory: tests/test_triton_sm90.py), nor a row that fits one looped tile."""
    assert triton_rows.ROW_FOLD == 2048
    assert triton_rows.fold_width(4096, 8, 4) == triton_rows.fold_width(4096, 16, 4) == triton_rows.fold_width(32768, 4, 4) == 2048
    assert triton_rows.fold_width(4096, 8, 2) == 2048 and triton_rows.fold_width(4096, 16, 2) == 0
    assert triton_rows.fold_width(4096, 32, 4) == 0 and triton_rows.fold_width(2048, 4, 4) == 0 and triton_rows.fold_width(1024, 1, 4) == 0


@pytest.mark.parametrize("cols", [4096, 3001])
def test_an_on_chip_two_pass_row_sums_as_the_2048_column_loop_does(cpu_runner, monkeypatch, cols):
    """LayerNorm two_pass on chip, its sums folded (row_sums), writes the bits the column
    loop of 2048-wide tiles writes: under the interpreter (numpy's sums) as on the GPU,
    where only the tuner's digests can tell (unfolded, they differ). Unfolded it
    sums in another order, and other bits come out: the fold is what makes them equal."""
    from harness.registry import frameworks
    frameworks()["triton"].prepare(cpu_runner.device)
    from impls.layernorm import triton as ln
    gen = torch.Generator().manual_seed(cols)
    x = torch.randn(64, cols, generator=gen) * 3 + 0.5
    g, b = torch.randn(cols, generator=gen), torch.randn(cols, generator=gen)
    base = dict(rows=1, num_warps=4, persistent=False, hints="plain", prefetch=False, early=False, ordered=False)

    def run(loop_block):
        _forced(monkeypatch, {**base, "loop_block": loop_block})
        out = torch.empty_like(x)
        ln.bind_two_pass(x, g, b, 1e-5, out)()
        return out.view(torch.int32)

    looped, folded = run(2048), run(0)
    assert torch.equal(folded, looped)
    monkeypatch.setattr(triton_rows, "fold_width", lambda *a: 0)
    assert not torch.equal(run(0), looped)


def test_a_family_just_outside_the_slack_still_gets_its_toggles_measured(monkeypatch):
    """On the H200 (LayerNorm fp32, 4096 columns, 16384 rows) the 8-warp bits' looped config
    ran 1.01% behind the 16-warp bits' fastest, just outside SMALL_SLACK, and with g and b
    early 1.4% ahead of it, the fastest of all. Toggles are measured on every family
    within TOGGLE_SLACK, so the tuner finds it; one further out is not toggled."""
    def fake_time(cfg, rows):
        shape = (cfg["rows"], cfg["num_warps"])
        if rows == tuner.SMALL_ROWS:
            return 4.8 if shape == (1, 8) and cfg["early"] else 5.5
        base = {(1, 16): 100.0, (1, 8): 101.5, (1, 4): 104.0}.get(shape, 120.0)
        return base * (0.975 if shape == (1, 8) and cfg["early"] else 1.04 if cfg["early"] else 1.0)

    assert tuner.SMALL_SLACK < 0.015 < tuner.TOGGLE_SLACK < 0.04
    tuned = _tune_with_stand_in_times(monkeypatch, 4096, fake_time, triton_rows.ROW_OPTIONS,
                                      bits=_warps_a_row)
    assert (tuned.config["rows"], tuned.config["num_warps"], tuned.config["early"]) == (1, 8, True)
    early = {(c["rows"], c["num_warps"]) for c in tuned.table["candidates"] if c["early"] and not c["persistent"]}
    assert (1, 8) in early and (1, 4) not in early


def test_predicated_is_tried_with_early_on_rows_that_fill_their_block(monkeypatch):
    """"predicated" (an option: LayerNorm's) is measured with EARLY on the on-chip shapes
    toggled, never alone, never on a looped config (masked anyway), and not at all where
    the row is shorter than its block; a batch may take it (bit-neutral)."""
    def fake_time(cfg, rows):
        if rows == tuner.SMALL_ROWS:
            return 4.0 if cfg.get("predicated") else 5.0
        return (100.0 if (cfg["rows"], cfg["num_warps"]) == (1, 8) else 110.0) * (1.05 if cfg["early"] else 1.0)

    options = (*triton_rows.ROW_OPTIONS, "looped_early", "predicated")
    tuned = _tune_with_stand_in_times(monkeypatch, 8192, fake_time, options)
    predicated = [c for c in tuned.table["candidates"] if c.get("predicated")]
    assert predicated and all(c["early"] and not c["loop_block"] for c in predicated)
    assert (tuned.config["num_warps"], tuned.config.get("predicated", False)) == (8, False)
    assert _small(tuned)["predicated"] and _same_bits(_small(tuned), tuned.config)
    without = _tune_with_stand_in_times(monkeypatch, 8192, fake_time, triton_rows.ROW_OPTIONS)
    assert not any(c.get("predicated") for c in without.table["candidates"])
    monkeypatch.setattr(tuner, "measure", lambda run, *timing: fake_time(*run()))
    try:   # 6000 columns in a block of 8192: masked already
        shorter = _tune_rows(("stand-in", 6000), 6000, 8192, _Fp16, lambda rows: rows,
                             lambda cfg, args, rows: lambda: (cfg, rows), options)
    finally:
        tuner.choices.pop(("stand-in", 6000, str(_Fp16)), None)
    assert not any(c.get("predicated") for c in shorter.table["candidates"])


def test_the_fast_search_times_the_small_batches_only_for_bits_that_may_be_chosen(monkeypatch):
    """fast: a shape whose bits match none of the configs within SMALL_SLACK of the fastest
    on the large problem is never timed on the small batches; exhaustive times every
    shape on every problem. Both choose the same config here."""
    def fake_time(cfg, rows):
        shape = (cfg["rows"], cfg["num_warps"])
        if rows <= tuner.MID_ROWS:
            return 5.0
        return {(1, 8): 100.0, (1, 4): 102.0}.get(shape, 130.0)

    chosen = {}
    for search in ("fast", "exhaustive"):
        monkeypatch.setattr(tuner, "SEARCH", search)   # harness-tune's search=
        timed = []
        tuned = _tune_with_stand_in_times(monkeypatch, 4096, fake_time, triton_rows.ROW_OPTIONS,
                                          measure=_recording(fake_time, timed), bits=_warps_a_row)
        chosen[search] = tuned.config
        near_bits = {_warps_a_row(c) for c in tuned.table["candidates"] if c["us"] <= 100.0 * (1 + tuner.SMALL_SLACK)}
        far = [c for c in tuned.table["candidates"] if _warps_a_row(c) not in near_bits]
        assert far and tuned.table["search"] == search
        if search == "fast":
            assert all(c["mid_us"] is None and c["small_us"] is None for c in far)
        else:
            assert all(c["mid_us"] is not None and c["small_us"] is not None for c in far)
    assert chosen["fast"] == chosen["exhaustive"]


def test_a_row_space_builds_every_config_before_it_is_timed(monkeypatch):
    """The tuner's build step asks bind for each config with row_launcher noting the
    kernel's call (its grid as a persistent launch would first try) instead of launching;
    the calls go to build_all, one list per kernel, in threads on a GPU."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(occupancy, "sm_count", lambda device: 132)
    monkeypatch.setattr(occupancy, "threads_per_sm", lambda device: 2048)
    built = []
    monkeypatch.setattr(triton_rows, "build_all", lambda builds: built.append(list(builds)))

    class Kernel:
        arg_names = ["x", "rows", "programs", "ROWS", "BLOCK", "ON_CHIP", "EVEN", "PERSISTENT", "LOAD", "STORE"]

    k = Kernel()

    def bind(cfg, args, n_rows):
        return triton_rows.row_launcher(k, cfg, n_rows, None, args, n_rows, BLOCK=1024, ON_CHIP=True, EVEN=True)

    configs = [dict(rows=1, num_warps=4, persistent=False, hints="plain"),
               dict(rows=2, num_warps=8, persistent=True, hints="stream")]
    triton_rows.precompile(bind)(configs, [("x", 1000), ("y", 16)])
    assert len(built) == 1 and [b[0] for b in built[0]] == [k] * 4   # every problem's builds in one step
    (_, (args1, kw1, grid1), name1), (_, (args2, kw2, grid2), name2) = built[0][:2]
    assert grid1 == (1000,) and args1 == ("x", 1000, 1000) and kw1["num_warps"] == 4
    assert grid2 == (500,) and kw2["PERSISTENT"] is True and kw2["STORE"] == ".cs"   # 500 tiles < 8 per SM x 132
    assert name1 == "rows=1 num_warps=4 persistent=False hints=plain (1000 rows)"   # the candidate, for reports
    assert built[0][2][1][0] == ("y", 16, 16)
    assert built[0][3][2] == "rows=2 num_warps=8 persistent=True hints=stream (16 rows)"
    assert triton_rows._noting.get() is None   # launches launch again afterwards


def test_a_candidate_that_cannot_run_gets_no_time_the_others_are_timed_and_harness_tune_says_so(monkeypatch):
    """A candidate that does not build or launch (an out-of-resources kernel) is kept in the
    table without a time; the others are timed and one chosen; harness-tune's comparison warns
    how many did not run."""
    from harness.commands import tune
    bad = {"rows": 1, "num_warps": 16}

    def is_bad(cfg):
        return all(cfg.get(k) == v for k, v in bad.items()) and not cfg.get("loop_block")

    def measure(run, *timing):
        cfg, rows = run()
        return None if is_bad(cfg) else 100.0 / cfg["num_warps"] + rows * 1e-6

    tuned = _tune_with_stand_in_times(monkeypatch, 4096, None, triton_rows.ROW_OPTIONS, measure=measure)
    idle = [c for c in tuned.table["candidates"] if c["us"] is None]
    assert idle == [c for c in tuned.table["candidates"] if is_bad(c)] != []
    assert len(tuned.table["candidates"]) - len(idle) > 3 and not is_bad(tuned.config)
    assert tune.warnings(tuned.table) == [f"{len(idle)} of {len(tuned.table['candidates'])} candidates did not run, "
                                          f"e.g. {tuner.config_of(idle[0])}"]


@pytest.mark.parametrize("search, interval", [("fast", 0.02), ("exhaustive", 0.0)])
def test_the_fast_search_stops_a_measurement_once_its_median_is_known_to_the_tie(monkeypatch, search, interval):
    budgets = []

    class Timer:
        def __init__(self, device):
            pass

        def time(self, run, budget, nbytes):
            budgets.append(budget)
            return types.SimpleNamespace(median_us=1.0)
    monkeypatch.setattr(tuner, "SEARCH", search)
    monkeypatch.setattr("harness.measure.timing.CudaTimer", Timer)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(tuner, "_timers", {})
    assert tuner.measure(lambda: None, 300, 0.15) == 1.0
    assert budgets[0].target_interval == interval == tuner.effort().target_interval
    assert interval == 0 or interval == 2 * tuner.SMALL_TIE   # the median within +-SMALL_TIE
