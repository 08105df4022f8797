"""Triton's launch configs where no table holds the row length (impls/_frameworks/triton:
rows.rule, elementwise.RULE) and the check a table's entry must pass (rows.checker), as each
Triton impl asks harness.launch.configs for them on a GPU: bound here with the interpreter off and
harness.launch.configs.config_for stood in, so that nothing launches."""
import pytest
import torch

from harness.launch import configs

from harness import registry
from impls._frameworks.triton import elementwise
from impls._frameworks.triton import rows as triton_rows

CPU = torch.device("cpu")
ROW_OPS = ("softmax", "rmsnorm", "layernorm", "rmsnorm_silu_mul_add")
# 1-3 columns (persistent tiles), 127-1024 (several rows a tile), 3000 and 5000 (shorter than
# their block), 4096-32768 (looped or on chip), past MAX_ON_CHIP (column tiles)
COLS = (1, 3, 32, 127, 781, 1024, 3000, 4096, 5000, 8192, 16384, 32768, 65537)
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


class _Asked(Exception):
    """What an impl asked harness.launch.configs for: raised by the stand-in config_for."""

    def __init__(self, asked: dict):
        super().__init__(asked["kernel"])
        self.asked = asked


def _impls(ops) -> list[tuple[str, str]]:
    registry.frameworks()["triton"].prepare(CPU)
    found = []
    for op in ops:
        impls, failures = registry.load_impls(op, ["triton"])
        assert not failures, failures
        # the naive variants ask for no config: a fixed rule (tests/test_triton_naive.py)
        found += [(op, i.key[2]) for i in impls if i.key[2] != "naive"]
    return found


ROW_IMPLS = _impls(ROW_OPS)
ELEMENTWISE_IMPLS = _impls(("copy", "scale"))


def asked(monkeypatch, op: str, variant: str, shape: tuple, dtype) -> dict:
    """What the Triton impl of ``op`` ``variant`` asks harness.launch.configs for, bound on ``shape``
    as on a GPU: its first config_for's kernel, rule, check and space (a callable)."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)

    def config_for(kernel, cols, dtype, batch, device, rule, check=None, space=None):
        raise _Asked(dict(kernel=kernel, cols=cols, rule=rule, check=check, space=space))
    monkeypatch.setattr(configs, "config_for", config_for)
    spec = registry.ops()[op]()
    inputs = spec.inputs(shape, dtype, CPU, seed=0)
    with pytest.raises(_Asked) as e:
        registry.registered()[(op, "triton", variant)].bind(**inputs, out=spec.make_output(inputs))
    return e.value.asked


def rule_of(monkeypatch, op, variant, cols, dtype) -> dict:
    return asked(monkeypatch, op, variant, (2, cols), dtype)["rule"]


def offered(space) -> list[dict]:
    """Every config harness-tune's search (harness.launch.rowsearch: tune_rows, for_batch) may time for a
    row kernel's ``space``: each shape; each shape with each small-batch toggle that applies
    whole; the plain configs along the greedy path, each toggle on any config before it; and
    any of those with a batch's other hints and grids, again and again."""
    found = [dict(c) for c in space.shapes]
    found += [{**c, **t} for c in space.shapes for t in space.small_batch if space.applicable(c, t) == t]
    plain = [dict(c) for c in space.shapes]
    for toggle in space.path:
        plain += [{**c, **t} for c in plain if (t := space.applicable(c, toggle))]
    found += plain
    frontier = found
    while frontier:
        fresh = []
        for c in frontier:
            for alternatives in space.batch:
                for a in alternatives(c):
                    if {**c, **a} not in found and {**c, **a} not in fresh:
                        fresh.append({**c, **a})
        found, frontier = found + fresh, fresh
    return found


@pytest.mark.parametrize("op,variant", ROW_IMPLS, ids=lambda v: v)
def test_the_rule_is_a_config_the_search_offers_and_the_checker_accepts(monkeypatch, op, variant):
    for cols in COLS:
        for dtype in DTYPES:
            a = asked(monkeypatch, op, variant, (2, cols), dtype)
            a["check"](a["rule"])
            assert a["rule"] in offered(a["space"]()), (cols, dtype, a["rule"])


@pytest.mark.parametrize("op,variant", ROW_IMPLS, ids=lambda v: v)
def test_the_checker_accepts_every_config_the_search_offers(monkeypatch, op, variant):
    """Batch configs included: a table's batch ranges hold what for_batch chose."""
    for cols in (3, 781, 4096, 8192, 65537):
        for dtype in (torch.float32, torch.bfloat16):
            a = asked(monkeypatch, op, variant, (2, cols), dtype)
            space = a["space"]()
            for config in offered(space):
                a["check"](config)
            if "loop_block" in a["rule"] and cols == 8192:   # the looped configs are among them
                assert {c["loop_block"] for c in offered(space)} == {0, 2048, 4096}


def test_the_checker_refuses_what_the_kernel_cannot_take(monkeypatch):
    """A table older than the kernel (a switch it no longer has, a shape it no longer offers)
    or written by hand: the check names the problem, and harness.launch.configs runs the rule."""
    a = asked(monkeypatch, "rmsnorm", "tuned", (2, 4096), torch.bfloat16)
    check, rule = a["check"], a["rule"]
    check(rule)
    looped = {**rule, "loop_block": 2048, "num_warps": 8}
    check(looped)
    refused = {"a removed switch": {**rule, "reload": False}, "a removed register cap": {**looped, "maxnreg": 32},
               "a switch missing": {k: v for k, v in rule.items() if k != "early"},
               "a switch that is no bool": {**rule, "early": 1}, "hints unknown": {**rule, "hints": "evict"},
               "a tile not offered": {**rule, "loop_block": 0, "rows": 1, "num_warps": 32},
               "a looped tile not offered": {**looped, "loop_block": 1024},
               "a looped tile as long as the row": {**looped, "loop_block": 4096},
               "several rows on the looped path": {**looped, "rows": 2, "num_warps": 16},
               "predicated, not one of RMSNorm's options": {**rule, "early": True, "predicated": True}}
    for why, config in refused.items():
        with pytest.raises(ValueError):
            check(config)
            pytest.fail(why)
    softmax = asked(monkeypatch, "softmax", "on_chip", (2, 4096), torch.float32)
    keys = r"its keys \[.*'early'.*\] are not this kernel's \['hints', 'num_warps', 'persistent', 'rows'\]$"
    with pytest.raises(ValueError, match=keys):
        softmax["check"]({**softmax["rule"], "early": False})   # softmax has no switch


def test_a_table_entry_the_checker_refuses_gives_way_to_the_rule(tmp_path, monkeypatch):
    """An entry of a table written before a switch was removed: the run takes the rule, and
    the config's source says why."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(configs, "TABLES", tmp_path)
    monkeypatch.setattr(configs, "_tables", {})
    monkeypatch.setattr(configs, "gpu_name", lambda device: "NVIDIA H200")
    old = ("rows: 1, num_warps: 8, persistent: false, hints: plain, prefetch: false, early: false, ordered: false, "
           "loop_block: 0, maxnreg: 0")
    (tmp_path / "h200.yaml").write_text(f"gpu: NVIDIA H200\nkernels:\n  triton rmsnorm tuned:\n"
                                        f"    4096 bfloat16: {{{old}}}\n")
    options = (*triton_rows.ROW_OPTIONS, "looped_early")
    cfg = triton_rows.row_choice(("rmsnorm", "tuned"), 16, 4096, 4096, True, torch.bfloat16, CPU, None, None,
                                 options=options)
    assert cfg.pop("source").startswith("rule (the table's 4096 bfloat16 does not fit this kernel: its keys [")
    assert cfg == triton_rows.rule("rmsnorm", "tuned", 4096, 4096, True, 2, options)


# --- each branch of rows.rule, at a case its docstring names ---------------------------------

def test_rows_longer_than_max_on_chip_take_16_warps(monkeypatch):
    """65537 columns in 4096-column tiles (no options off chip): 16 warps, not Liger's 8."""
    for op, variant in (("rmsnorm", "tuned"), ("layernorm", "welford"), ("softmax", "online")):
        assert rule_of(monkeypatch, op, variant, 65537, torch.bfloat16) == \
            dict(rows=1, num_warps=16, persistent=False, hints="plain")


def test_rmsnorm_and_the_chain_loop_over_rows_that_fill_a_block_of_4096_or_more(monkeypatch):
    """RMSNorm bf16 16384: looped, 4096-column tiles on 16 warps (on chip on 16 warps it ran
    0.75 of the tuned config on the H200); from 4096 columns 2048-column tiles, on 8 warps for
    16-bit data, 16 for fp32. Not a row shorter than its block (5000 in 8192), nor LayerNorm."""
    def looped(op, variant, cols, dtype):
        r = rule_of(monkeypatch, op, variant, cols, dtype)
        return r.get("loop_block"), r["num_warps"]
    assert looped("rmsnorm", "tuned", 16384, torch.bfloat16) == (4096, 16)
    assert looped("rmsnorm", "tuned", 8192, torch.float32) == (4096, 16)
    assert looped("rmsnorm", "tuned", 4096, torch.bfloat16) == (2048, 8)
    assert looped("rmsnorm", "tuned", 4096, torch.float32) == (2048, 16)
    assert looped("rmsnorm_silu_mul_add", "fused", 4096, torch.float16) == (2048, 8)
    assert looped("rmsnorm", "tuned", 5000, torch.bfloat16)[0] == 0
    assert looped("rmsnorm", "tuned", 2048, torch.bfloat16)[0] == 0
    assert looped("layernorm", "two_pass", 16384, torch.bfloat16)[0] == 0


def test_short_rows_share_a_tile(monkeypatch):
    """RMSNorm bf16 781 (one row a program ran 0.60-0.75 on the H200): tiles of 4 rows (4096
    elements); the chain 2 (2048); Welford LayerNorm and softmax one; LayerNorm two_pass 32
    elements a thread."""
    def shape(op, variant, dtype):
        r = rule_of(monkeypatch, op, variant, 781, dtype)
        return r["rows"], r["num_warps"]
    assert shape("rmsnorm", "tuned", torch.bfloat16) == (4, 4)
    assert shape("rmsnorm_silu_mul_add", "fused", torch.bfloat16) == (2, 4)
    assert shape("layernorm", "welford", torch.bfloat16) == (1, 1)
    assert shape("layernorm", "two_pass", torch.float32) == (4, 4)
    assert shape("softmax", "on_chip", torch.float32)[0] == 1


def test_warps_follow_the_bytes_a_thread_holds(monkeypatch):
    """Welford LayerNorm bf16 16384: 8 warps, 128 bytes a thread (Liger's 16 ran 0.64 on the
    H200); softmax fp32 4096: 8 warps, 64 bytes; the chain bf16 on chip at 5000 columns (a
    block of 8192): 16 warps, 32 bytes."""
    assert rule_of(monkeypatch, "layernorm", "welford", 16384, torch.bfloat16)["num_warps"] == 8
    assert rule_of(monkeypatch, "softmax", "on_chip", 4096, torch.float32)["num_warps"] == 8
    chain = rule_of(monkeypatch, "rmsnorm_silu_mul_add", "fused", 5000, torch.bfloat16)
    assert (chain["loop_block"], chain["num_warps"]) == (0, 16)


def test_three_pass_softmax_takes_16_warps_from_16_kib_rows(monkeypatch):
    """Three-pass softmax bf16 16384 (32 KiB; 4 warps ran 0.65 on the H200): 16 warps; at 8
    KiB, and the online variant at 32 KiB, the bytes' rule: 4."""
    assert rule_of(monkeypatch, "softmax", "three_pass", 16384, torch.bfloat16)["num_warps"] == 16
    assert rule_of(monkeypatch, "softmax", "three_pass", 4096, torch.bfloat16)["num_warps"] == 4
    assert rule_of(monkeypatch, "softmax", "online", 16384, torch.bfloat16)["num_warps"] == 4


def test_tiny_tiles_run_a_persistent_grid_prefetching_where_the_kernel_can(monkeypatch):
    """RMSNorm fp32 3 columns (one program per tile ran 0.04-0.24, persistent and prefetching
    0.98-0.99): 4 rows of 4 a tile, persistent, prefetching; softmax has no PREFETCH; a tile
    of more than 128 elements is not persistent."""
    assert rule_of(monkeypatch, "rmsnorm", "tuned", 3, torch.float32) == \
        dict(rows=4, num_warps=1, persistent=True, hints="plain", prefetch=True, early=False, ordered=False,
             loop_block=0)
    assert rule_of(monkeypatch, "softmax", "on_chip", 128, torch.float32) == \
        dict(rows=1, num_warps=1, persistent=True, hints="plain")
    assert not rule_of(monkeypatch, "softmax", "on_chip", 129, torch.float32)["persistent"]


@pytest.mark.parametrize("op,variant", ELEMENTWISE_IMPLS, ids=lambda v: v)
def test_the_1d_rule_is_2048_element_tiles_on_4_warps(monkeypatch, op, variant):
    """copy, scale (and the unfused chain's steps): BLOCK 2048 on 4 warps, plain (1024 ran
    2^28 bf16 elements at 0.90 on the H200), a tile the search offers and the check accepts."""
    a = asked(monkeypatch, op, variant, (1 << 20,), torch.bfloat16)
    assert a["rule"] == elementwise.RULE == dict(BLOCK=2048, num_warps=4, hints="plain")
    a["check"](a["rule"])
    assert a["rule"] in a["space"]().configs
