"""Every Triton kernel compiled for the H100/H200 (sm_90) on this CPU machine, with
Triton's bundled ptxas: it must compile, move data in 16-byte vector accesses on its
unmasked paths, and keep its working set out of local memory. No GPU needed; it catches
what would otherwise cost a GPU run, and checks what METHOD.md says to read first."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Not imported here: Triton decides at import whether its own @jit helpers (tl.cdiv, ...)
# are interpreter functions, and the CPU tests in this process need them to be (the
# harness sets TRITON_INTERPRET before it imports Triton). The report runs in a subprocess.
if importlib.util.find_spec("triton") is None:
    pytest.skip("triton is not installed", allow_module_level=True)
ROOT = Path(__file__).resolve().parent.parent

@pytest.fixture(scope="module")
def report():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-m", "tests.sm90_report"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_every_triton_kernel_is_in_the_report(report):
    """A kernel: a @triton.jit function of impls/<op>/triton.py taking pointers and a BLOCK
    and reading its program id (a tile function it calls takes its tile as a parameter);
    read from the source: in this process the modules may hold interpreter functions."""
    import ast
    found = set()
    for path in sorted((ROOT / "impls").glob("*/triton.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
                params = [a.arg for a in node.args.args]
                if "BLOCK" in params and any(p.endswith("_ptr") for p in params) and "program_id" in ast.unparse(node):
                    found.add(node.name)
    # the report's names, not an import of the impls here: this process's CPU tests need them
    # imported under the interpreter (run alone, this file would otherwise import them first)
    reported = {r["kernel"] for r in report.values()}
    assert len(found) >= 8 and found <= reported, found - reported
    assert len(report) >= 40


def test_kernels_compile_for_sm90_with_wide_accesses_and_no_spills(report):
    problems = []
    for name, r in sorted(report.items()):
        if "error" in r:
            problems.append(f"{name}: does not compile: {r['error'][:300]}")
            continue
        loads = [op for op in r["ops"] if op.startswith(("ld.global", "ld.volatile.global"))]   # ORDERED: volatile
        if not loads:
            problems.append(f"{name}: no global loads? {r['ops']}")
        if r["vector"] and not any(".v4.b32" in op or ".v2.b64" in op for op in loads):
            problems.append(f"{name}: no 16-byte loads: {r['ops']}")
        if any(op.startswith("ex2.approx.ftz") for op in r["ops"]):
            problems.append(f"{name}: ex2.approx.ftz flushes subnormal results to zero: use tl.exp")
        if r["local"]:
            problems.append(f"{name}: {r['local']} bytes of local memory per thread (spills)")
    assert not problems, "\n".join(problems)


def test_one_program_per_tile_compiles_to_straight_line_code(report):
    """A row kernel launched one program per tile has no loop over tiles (_triton_rows: one_tile):
    its first loads wait on no read of the row count and no branch. The persistent form
    keeps its loop, so the count sees a loop where there is one."""
    tiles = {name: r for name, r in report.items() if name.endswith(":tile")}
    assert len(tiles) >= 8, sorted(report)
    assert {name: r["ops"]["bra"] for name, r in tiles.items() if r["ops"]["bra"]} == {}
    assert all(report[name.removesuffix(":tile")]["ops"]["bra"] > 0 for name in tiles)


def test_one_program_per_tile_has_no_barrier_for_a_loop(report):
    """Straight-line, a tile's reductions take one barrier fewer than the same tile in the
    persistent loop, where a barrier at the top of the body guards the shared memory the
    previous trip's reductions read (_triton_rows: one_tile)."""
    loops = {name: report[name.removesuffix(":tile")]["ops"] for name in report if name.endswith(":tile")}
    loops = {name: ops for name, ops in loops.items() if ops.get("sass:BAR")}   # one warp: no barriers at all
    assert len(loops) >= 8, sorted(loops)
    assert {name: (report[name]["ops"].get("sass:BAR", 0), ops["sass:BAR"]) for name, ops in loops.items()
            if report[name]["ops"].get("sass:BAR", 0) != ops["sass:BAR"] - 1} == {}


def test_one_program_per_row_loads_unpredicated(report):
    """A grid of one program per row has no row past the end (tile_offsets: FULL): a row
    that fills its block is loaded with no predicate (the compiler cannot know that the
    program id is below ``rows``: it kept the compare and predicated every load before
    FULL). A tile of several rows may run past the last row: its row mask stays. (In the
    persistent loop without PREFETCH the loop bound proves the mask, FULL or not.)"""
    tiles = {name: r for name, r in report.items() if name.endswith(":tile") and r["even"] and "error" not in r}
    one_row = {name: r["ops"]["sass:LDG_predicated"] for name, r in tiles.items() if r["rows"] == 1}
    assert len(one_row) >= 8 and set(one_row.values()) == {0}, one_row
    several = {name: r["ops"]["sass:LDG_predicated"] for name, r in tiles.items() if r["rows"] > 1}
    assert len(several) >= 4 and all(several.values()), several


def test_a_row_kernel_takes_one_binary_whatever_the_batch(report):
    """RMSNorm's row kernel leaves its row and program counts unspecialised (rows.BATCH_ARGS):
    the tuner's problems (an odd row count, 2048, 16), one row and a persistent grid launch
    one binary per config, as Triton's binder keys them in the report's process; the other
    row kernels keep Triton's specialisation (a binary per class of count)."""
    row_kernels = {r["kernel"] for r in report.values() if "batch_keys" in r}
    assert row_kernels == {"_rmsnorm", "_layernorm", "_softmax", "_fused"}
    keys = {name: r["batch_keys"] for name, r in report.items() if "batch_keys" in r}
    assert {name: n for name, n in keys.items() if report[name]["kernel"] == "_rmsnorm" and n != 1} == {}
    # the others keep Triton's specialisation (rows.BATCH_ARGS says why): a binary per class of count
    assert all(n > 1 for name, n in keys.items() if report[name]["kernel"] != "_rmsnorm")


def test_a_row_compiled_for_its_length_moves_no_padding(report):
    """781 columns in a block of 1024 on one warp: a lane holds 32 of the block's elements,
    at most 25 of them in the row. Compiled for its length (static_cols), the masks fold:
    the other registers' stores go (and softmax's loads and exps: its lanes hold every
    32nd element, LayerNorm's runs of 8, whose loads ptxas keeps), and the mask tests with
    them; compiled for any length, every register keeps them (which cost softmax 1823x781
    its lead over Liger). Counted in the SASS: the PTX keeps every predicated access."""
    def count(name, kind):
        return report[name]["ops"].get(f"sass:{kind}", 0)
    for op in ("softmax", "layernorm"):
        for dt in ("bf16", "fp32"):
            for grid in ("", ":tile"):
                fixed, any_length = f"{op}781:*{dt}{grid}", f"{op}781_any_length:*{dt}{grid}"
                assert (count(fixed, "STG"), count(any_length, "STG")) == (25, 32), report[fixed]["ops"]
                assert count(fixed, "ISETP") * 5 < count(any_length, "ISETP"), report[fixed]["ops"]
                if op == "softmax":
                    assert (count(fixed, "LDG"), count(any_length, "LDG")) == (25, 32)
                    assert count(fixed, "MUFU") < count(any_length, "MUFU")


def test_ordered_loads_all_go_out_before_the_reduction(report):
    """A small batch's tile (one row of 4096 on 8 warps) with its other operands loaded
    early in the source (EARLY): ptxas still issues some of them only once x has arrived
    and its reduction is under way (a second wait on memory when L2 is cold). Loaded
    volatile, operands first (ORDERED), every load of the tile is issued before the first
    shuffle or barrier. Counted in the SASS: x and each operand are two 16-byte loads per
    thread in bf16 (16 elements), four in fp32."""
    per_operand = {"bf16": 2, "fp32": 4}
    operands = {"rmsnorm": 2, "chain": 4, "layernorm": 3}
    for op, n in operands.items():
        for dt, vectors in per_operand.items():
            ordered = report[f"{op}_small_ordered:*{dt}:tile"]["ops"]
            early = report[f"{op}_small_early:*{dt}:tile"]["ops"]
            assert ordered["sass:LDG"] == early["sass:LDG"] == n * vectors, (op, dt, ordered, early)
            assert ordered["sass:LDG_before_sync"] == n * vectors, (op, dt, ordered)
            assert early["sass:LDG_before_sync"] < n * vectors, (op, dt, early)
    # a looped row that fits on chip (16384 in 4096-tiles, 16 warps): the operands loaded
    # whole and x's first pass, volatile, all before the first reduction; its later passes
    # (from L2) after it. EARLY leaves some of the operands' loads behind.
    first_pass = {"rmsnorm": 2, "chain": 4, "layernorm_two_pass": 3}   # x and the operands, vectors each
    for op, n in first_pass.items():
        for dt, vectors in {"bf16": 4, "fp32": 8}.items():   # 32 elements a thread
            ordered = report[f"{op}_looped_static_ordered:*{dt}"]["ops"]
            early = report[f"{op}_looped_static_early:*{dt}"]["ops"]
            assert ordered["sass:LDG_before_sync"] == n * vectors, (op, dt, ordered)
            assert early["sass:LDG_before_sync"] < n * vectors, (op, dt, early)


def test_a_predicated_layernorm_row_issues_every_load_before_its_reduction(report):
    """LayerNorm's "predicated" toggle: one fp32 row of 4096 on 8 warps, g and b loaded
    early, every load masked on the row's length though none is masked out. ptxas then
    issues all twelve 16-byte loads (x, g, b: four each) before the first shuffle or
    barrier, as in Liger's kernel; the same tile unmasked leaves g's and b's behind the
    first reduction (on the H200: 32.12 us at 4096x4096 against 32.53, Liger's 32.38). In
    bf16 the masks do not do it (4 of 6 loads): the tuner measures the toggle, it does not
    assume it."""
    predicated = report["layernorm_small_predicated:*fp32:tile"]["ops"]
    unmasked = report["layernorm_small_early_folded:*fp32:tile"]["ops"]
    assert predicated["sass:LDG"] == unmasked["sass:LDG"] == 12, (predicated, unmasked)
    assert predicated["sass:LDG_before_sync"] == 12 > unmasked["sass:LDG_before_sync"], (predicated, unmasked)
    assert predicated["sass:LDG_predicated"] == 12 and unmasked["sass:LDG_predicated"] == 0
    assert predicated["regs"] == unmasked["regs"] <= 64   # four programs an SM either way


def test_a_folded_row_sum_stays_in_registers(report):
    """LayerNorm two_pass on chip, its sums folded into 2048-wide tiles (row_sums, so that
    it writes a looped config's bits): where fold_width folds (fp32 on 8 and 16 warps, bf16
    on 8), each thread adds its own elements j and j + 2048, and the kernel exchanges no
    more through shared memory than unfolded. bf16 on 16 warps holds them in different
    warps: folded anyway ("forced"), its data crosses shared memory, which is why
    fold_width does not fold there."""
    def smem(name):
        ops = report[name]["ops"]
        return {k: ops.get(f"sass:{k}", 0) for k in ("STS", "LDS", "BAR")}
    for dt, warps in (("fp32", 8), ("fp32", 16), ("bf16", 8), ("bf16", 16)):
        fold, nofold = (f"layernorm_two_pass{warps}w_{n}:*{dt}" for n in ("fold", "nofold"))
        assert smem(fold) == smem(nofold), (dt, warps, smem(fold), smem(nofold))
    forced = smem("layernorm_two_pass16w_forced:*bf16")
    assert forced["STS"] > smem("layernorm_two_pass16w_nofold:*bf16")["STS"], forced


def test_the_one_launch_reductions_publish_each_partial_before_its_ticket(report):
    """impls/sum/triton.py: a program's partial (a store, or the atomic add) is followed by
    a barrier, then the ticket's acq_rel atomic at GPU scope; the program with the last
    ticket reads the partials from L2 (.cg) after a barrier (the ticket's broadcast), and
    resets the counter last. A relaxed ticket, or a plain (L1) read of the partials,
    would let the last program sum partials not yet visible to it."""
    for name in ("sum_two_pass:*bf16", "max:*fp32"):
        order = report[name]["ops"]["order"]
        assert "st bar atom.acq_rel bar ld.cg" in order, (name, order)
        assert order.endswith("st st"), (name, order)   # the result, then the counter reset
        assert report[name]["ops"]["atom.global.gpu.acq_rel.add.u32"] == 1, report[name]["ops"]
    order = report["sum:*bf16"]["ops"]["order"]   # atomic: the add, a barrier, the ticket; the read
    assert "atom bar atom.acq_rel" in order and order.count("atom.acq_rel") == 2, order
    assert order.endswith("st st st"), order      # the accumulator reset, the result, the counter
    assert "atom" not in report["sum_one_program:*bf16"]["ops"]["order"]


def test_a_one_tile_reduction_is_one_load_and_one_tree(report):
    """impls/sum/triton.py, ONE_PROGRAM: an input of one tile (the sweep's 4096 elements) is
    loaded once and reduced in one tree, with no loop, no tail and no ticket; a max keeps
    NaN inside its combine (max.NaN), where tl.max and a count of the NaN lanes took two
    trees, two barriers more (on the H200: max at 4096 5.06 us against the sum's 4.80)."""
    for name in ("sum_one_program", "max_one_program"):
        for dt in ("bf16", "fp32"):
            ops = report[f"{name}:*{dt}"]["ops"]
            assert ops["bra"] == 0, (name, dt, ops)
            assert ops["sass:BAR"] == 2 and ops["order"] == "bar bar st", (name, dt, ops)
            assert ops["sass:LDG_before_sync"] == ops["sass:LDG"], (name, dt, ops)   # every load first


def test_the_1d_reduction_fits_its_whole_grid_on_the_gpu_at_once(report):
    """impls/sum/triton.py launches PROGRAMS_PER_SM programs of WARPS warps per SM: all of
    them run at once only within the SM's 65536 registers. A kernel over that budget runs
    the last programs as a second wave (on the H200 the two-pass kernel on 40 registers
    ran 1.5-2% slower at 2^28 elements)."""
    from impls.sum.triton import PROGRAMS_PER_SM, WARPS
    reductions = {name: r for name, r in report.items() if r.get("kernel") == "_reduce_1d"}
    assert len(reductions) == 10, sorted(reductions)
    for name, r in reductions.items():
        assert r["ops"]["regs"] * 32 * WARPS * PROGRAMS_PER_SM <= 65536, (name, r["ops"]["regs"])
        assert r["local"] == 0, (name, r["local"])
