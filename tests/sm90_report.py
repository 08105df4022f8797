"""Compile every Triton kernel for sm_90 and report its global accesses and local memory.
Run as a module in a process of its own (TRITON_INTERPRET unset): in the test process the
kernels may already be interpreter functions. Used by tests/test_triton_sm90.py."""
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")


def with_defaults(fn, constexprs):
    """The kernel's constexprs as its launches set them where an entry does not."""
    constexprs = {"LOAD": "", "STORE": "", **constexprs} if "LOAD" in fn.arg_names else constexprs
    constexprs = {"PERSISTENT": True, **constexprs} if "PERSISTENT" in fn.arg_names else constexprs
    return {"COLS": 0, **constexprs} if "COLS" in fn.arg_names else constexprs   # any row length


def compile_sm90(fn, signature, constexprs, num_warps, aligned):
    """``aligned``: the pointer args (16-byte aligned, as torch allocates) and the integer
    args that Triton's launcher would see as multiples of 16 (it specializes on that)."""
    constexprs = with_defaults(fn, constexprs)
    # maxnreg: a compile option (ptxas's register cap), passed among the constexprs as the
    # launchers pass it
    options = {"num_warps": num_warps, **({"maxnreg": constexprs["maxnreg"]} if "maxnreg" in constexprs else {})}
    constexprs = {k: v for k, v in constexprs.items() if k != "maxnreg"}
    sig = {**signature, **{k: "constexpr" for k in constexprs}}
    names = list(sig)
    attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in aligned}
    kernel = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=constexprs, attrs=attrs),
                            target=GPUTarget("cuda", 90, 32), options=options)
    ops = collections.Counter(re.sub(r"\.L[12]::[\w:]+", "", m)
                              for m in re.findall(r"(?:ld|st|atom|red)(?:\.volatile)?\.global\S*|ex2\.\S+", kernel.asm["ptx"]))
    ops["bra"] = len(re.findall(r"\bbra(?:\.uni)?\s", kernel.asm["ptx"]))   # loops (and any other branch)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        usage = subprocess.run([CUOBJDUMP, "-res-usage", f.name], capture_output=True, text=True).stdout
        sass = subprocess.run([CUOBJDUMP, "-sass", f.name], capture_output=True, text=True).stdout
    local = int(re.search(r"LOCAL:(\d+)", usage).group(1))
    ops["regs"] = int(re.search(r"REG:(\d+)", usage).group(1))   # per thread: how many programs fit an SM
    # what ptxas kept: SASS opcodes (LDG, STG, MUFU, ...), predicated or not
    opcodes = re.findall(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9]*)", sass)
    ops.update({f"sass:{op}": n for op, n in collections.Counter(opcodes).items()})
    # loads issued before the first exchange between threads (a shuffle or a barrier: a
    # reduction under way, so its input has arrived)
    first_sync = next((i for i, op in enumerate(opcodes) if op in ("SHFL", "BAR")), len(opcodes))
    ops["sass:LDG_before_sync"] = opcodes[:first_sync].count("LDG")
    ops["sass:LDG_predicated"] = len(re.findall(r"/\*[0-9a-f]{4}\*/\s+@!?P\w+\s+LDG", sass))
    # the global stores, atomics, barriers and L2 loads in program order (the one-launch
    # reductions' ticket: a partial's store, a barrier, the ticket's acq_rel atomic)
    ops["order"] = " ".join(m.split(".")[0] + (".acq_rel" if "acq_rel" in m else "") + (".cg" if ".cg" in m else "")
                            for m in re.findall(r"(?:st\.global|atom\.global|ld\.global\.cg|bar\.sync)\S*",
                                                kernel.asm["ptx"]))
    return ops, local


H200_SMS = 132


def reduce_entry(name, p, is_max, atomic, aligned, one_program=False):
    """The 1-D reduction (impls/sum/triton.py) as reduce_1d launches it on an H200: its
    BLOCK, warps and register cap, and one program or the full grid's partials."""
    from impls._frameworks.triton.launch import next_pow2
    from impls.sum.triton import BLOCK, MAXNREG, PROGRAMS_PER_SM, WARPS, _reduce_1d
    sig = {"x_ptr": p, "out_ptr": "*fp32", "scratch_ptr": "*fp32", "ticket_ptr": "*i32", "n": "i32", "programs": "i32"}
    const = {"IS_MAX": is_max, "ATOMIC": atomic, "ONE_PROGRAM": one_program, "BLOCK": BLOCK,
             "P_BLOCK": 1 if one_program else next_pow2(PROGRAMS_PER_SM * H200_SMS), "maxnreg": MAXNREG}
    return name, _reduce_1d, sig, const, WARPS, aligned, True


def kernels():
    from impls._frameworks.triton.rows import fold_width
    from impls.copy.triton import _copy
    from impls.layernorm.triton import _layernorm
    from impls.rmsnorm.triton import _rmsnorm
    from impls.rmsnorm_silu_mul_add.triton import _fused, _pointwise
    from impls.scale.triton import _scale
    from impls.softmax.triton import _softmax
    row = {"rows": "i32", "cols": "i32", "programs": "i32"}
    XY = ("x_ptr", "y_ptr")
    out = []
    for dt in ("bf16", "fp32"):
        p = "*" + dt
        itemsize = 2 if dt == "bf16" else 4
        out += [
            ("copy", _copy, {"x_ptr": p, "y_ptr": p, "n": "i32"}, {"BLOCK": 8192}, 8, XY, True),
            ("scale", _scale, {"x_ptr": p, "y_ptr": p, "a": "fp32", "n": "i32"}, {"BLOCK": 8192}, 8, XY, True),
            ("pointwise", _pointwise, {"a_ptr": p, "b_ptr": p, "y_ptr": p, "n": "i32"},
             {"OP": 1, "BLOCK": 8192}, 8, ("a_ptr", "b_ptr", "y_ptr"), True),
            reduce_entry("sum", p, is_max=False, atomic=True, aligned=("x_ptr",)),
            reduce_entry("max", p, is_max=True, atomic=False, aligned=("x_ptr", "scratch_ptr")),
            reduce_entry("sum_two_pass", p, is_max=False, atomic=False, aligned=("x_ptr", "scratch_ptr")),
            # one masked load of the tile: 16-byte loads where n is a multiple of 16, as Triton
            # then specialises it (the sweep's 4096); other n load element by element, as the
            # ragged tail of any length does
            reduce_entry("sum_one_program", p, is_max=False, atomic=False, aligned=("x_ptr", "n"), one_program=True),
            reduce_entry("max_one_program", p, is_max=True, atomic=False, aligned=("x_ptr", "n"), one_program=True),
        ]
        group = 16 // itemsize   # one 16-byte vector per Welford group, as the launcher has it
        for cols, rows, warps in ((4096, 2, 8), (16384, 1, 32)):
            on_chip = {"ROWS": rows, "BLOCK": cols, "ON_CHIP": True, "EVEN": True, "SPAN": 0}
            out += [
                (f"rmsnorm{cols}", _rmsnorm, {"x_ptr": p, "g_ptr": p, "y_ptr": p, **row, "eps": "fp32"},
                 {**on_chip, "PREFETCH": True, "EARLY": True}, warps, ("x_ptr", "g_ptr", "y_ptr", "cols"), True),
                (f"chain{cols}", _fused, {"x_ptr": p, "g_ptr": p, "u_ptr": p, "r_ptr": p, "y_ptr": p, **row,
                                          "eps": "fp32"}, {**on_chip, "EARLY": rows == 1}, warps,
                 ("x_ptr", "g_ptr", "u_ptr", "r_ptr", "y_ptr", "cols"), True),
            ]
            for v in (0, 1, 2):
                out.append((f"softmax{cols}v{v}", _softmax, {"x_ptr": p, "y_ptr": p, **row},
                            {"VARIANT": v, "ROWS": 1, "BLOCK": cols if v == 0 else 4096, "EVEN": v == 0},
                            warps if v == 0 else 8,
                            ("x_ptr", "y_ptr", "cols"), True))
                out.append((f"layernorm{cols}v{v}", _layernorm,
                            {"x_ptr": p, "g_ptr": p, "b_ptr": p, "y_ptr": p, **row, "eps": "fp32"},
                            {"VARIANT": v, **on_chip, "GROUP": group, "PREFETCH": v == 0, "EARLY": v == 1},
                            warps, ("x_ptr", "g_ptr", "b_ptr", "y_ptr", "cols"), True))
        # a small batch's tile, its other operands loaded early (EARLY) or ahead of x, volatile
        # (ORDERED); ":tile", one program per tile, is how a small batch runs
        small = {"ROWS": 1, "BLOCK": 4096, "ON_CHIP": True, "EVEN": True, "SPAN": 0, "PREFETCH": False,
                 "GROUP": group, "VARIANT": 1}
        for name, fn, sig in (("rmsnorm", _rmsnorm, {"x_ptr": p, "g_ptr": p, "y_ptr": p}),
                              ("chain", _fused, {"x_ptr": p, "g_ptr": p, "u_ptr": p, "r_ptr": p, "y_ptr": p}),
                              ("layernorm", _layernorm, {"x_ptr": p, "g_ptr": p, "b_ptr": p, "y_ptr": p})):
            for switch in ("EARLY", "ORDERED"):
                out.append((f"{name}_small_{switch.lower()}", fn, {**sig, **row, "eps": "fp32"},
                            {**small, "EARLY": switch == "EARLY", "ORDERED": switch == "ORDERED"}, 8,
                            (*sig, "cols"), True))
        # LayerNorm's "predicated" small-batch toggle (EARLY, the loads masked on the row's
        # length though it fills the block) as the tuner launches one row on 8 warps (its
        # sums folded: fold_width), beside the same tile unmasked
        ln = {"x_ptr": p, "g_ptr": p, "b_ptr": p, "y_ptr": p}
        fold = fold_width(4096, 8, itemsize)
        for name, even in (("layernorm_small_early_folded", True), ("layernorm_small_predicated", False)):
            out.append((name, _layernorm, {**ln, **row, "eps": "fp32"},
                        {**small, "EARLY": True, "EVEN": even, "FOLD": fold}, 8, (*ln, "cols"), True))
        looped = {"ROWS": 1, "BLOCK": 4096, "ON_CHIP": False, "EVEN": False, "PREFETCH": False, "EARLY": False,
                  "SPAN": 0}
        static = {**looped, "SPAN": 16384}   # a row that fits on chip, walked in unrolled column tiles
        for name, fn, sig, extra in (
                ("rmsnorm", _rmsnorm, {"x_ptr": p, "g_ptr": p, "y_ptr": p}, {}),
                ("chain", _fused, {"x_ptr": p, "g_ptr": p, "u_ptr": p, "r_ptr": p, "y_ptr": p}, {}),
                ("layernorm_welford", _layernorm, {"x_ptr": p, "g_ptr": p, "b_ptr": p, "y_ptr": p}, {"VARIANT": 0}),
                ("layernorm_two_pass", _layernorm, {"x_ptr": p, "g_ptr": p, "b_ptr": p, "y_ptr": p}, {"VARIANT": 1})):
            out.append((f"{name}_looped_static", fn, {**sig, **row, "eps": "fp32"},
                        {**static, "GROUP": group, **extra}, 16, (*sig, "cols"), True))
            # a small batch: the whole row's other operands up front (looped_early), or ahead of
            # x's first pass, volatile (ORDERED)
            for switch in ("EARLY", "ORDERED"):
                out.append((f"{name}_looped_static_{switch.lower()}", fn, {**sig, **row, "eps": "fp32"},
                            {**static, "GROUP": group, **extra, switch: True}, 16, (*sig, "cols"), True))
        out.append(("rmsnorm_looped", _rmsnorm, {"x_ptr": p, "g_ptr": p, "y_ptr": p, **row, "eps": "fp32"},
                    looped, 8, ("x_ptr", "g_ptr", "y_ptr"), False))
        out.append(("rmsnorm_looped_aligned", _rmsnorm, {"x_ptr": p, "g_ptr": p, "y_ptr": p, **row, "eps": "fp32"},
                    {**looped, "BLOCK": 2048}, 8, ("x_ptr", "g_ptr", "y_ptr", "cols"), True))
        out.append(("layernorm_looped_two_pass", _layernorm,
                    {"x_ptr": p, "g_ptr": p, "b_ptr": p, "y_ptr": p, **row, "eps": "fp32"},
                    {"VARIANT": 1, **looped, "BLOCK": 2048, "GROUP": group}, 8,
                    ("x_ptr", "g_ptr", "b_ptr", "y_ptr", "cols"), True))
        out.append(("layernorm_looped_welford", _layernorm,
                    {"x_ptr": p, "g_ptr": p, "b_ptr": p, "y_ptr": p, **row, "eps": "fp32"},
                    {"VARIANT": 0, **looped, "GROUP": group}, 8,
                    ("x_ptr", "g_ptr", "b_ptr", "y_ptr"), False))
        # LayerNorm two_pass on chip (4096, one row a tile), its sums folded into 2048-wide
        # tiles (row_sums) or not; "forced": folded where fold_width would not (bf16, 16 warps)
        for warps in (8, 16):
            fold = fold_width(4096, warps, itemsize)
            for name, width in (("fold", fold), ("nofold", 0), ("forced", 2048)):
                out.append((f"layernorm_two_pass{warps}w_{name}", _layernorm,
                            {"x_ptr": p, "g_ptr": p, "b_ptr": p, "y_ptr": p, **row, "eps": "fp32"},
                            {"VARIANT": 1, "ROWS": 1, "BLOCK": 4096, "ON_CHIP": True, "EVEN": True, "SPAN": 0,
                             "GROUP": group, "PREFETCH": False, "EARLY": False, "FOLD": width},
                            warps, ("x_ptr", "g_ptr", "b_ptr", "y_ptr", "cols"), True))
        # a row shorter than its block (781 in 1024, one warp): compiled for its length
        # (static_cols), and for any; not 16-byte aligned, so no vectors either way
        for name, cols in (("softmax781", 781), ("softmax781_any_length", 0)):
            out.append((name, _softmax, {"x_ptr": p, "y_ptr": p, **row},
                        {"COLS": cols, "VARIANT": 0, "ROWS": 1, "BLOCK": 1024, "EVEN": False}, 1, ("x_ptr", "y_ptr"),
                        False))
        for name, cols in (("layernorm781", 781), ("layernorm781_any_length", 0)):
            out.append((name, _layernorm, {"x_ptr": p, "g_ptr": p, "b_ptr": p, "y_ptr": p, **row, "eps": "fp32"},
                        {"COLS": cols, "VARIANT": 1, "ROWS": 1, "BLOCK": 1024, "ON_CHIP": True, "EVEN": False,
                         "SPAN": 0, "GROUP": group, "PREFETCH": False, "EARLY": True}, 1,
                        ("x_ptr", "g_ptr", "b_ptr", "y_ptr"), False))
    return out


def one_program_per_tile(entries):
    """The row kernels' on-chip entries again as a grid of one program per tile launches
    them (PERSISTENT off, so PREFETCH too): named ``<name>:tile``."""
    return [(f"{name}:tile", fn, sig, {**const, "PERSISTENT": False, "PREFETCH": False}, warps, aligned, vector)
            for name, fn, sig, const, warps, aligned, vector in entries
            if const.get("ON_CHIP") or (name.startswith("softmax") and const.get("VARIANT") == 0)]


# (rows, programs) of a row kernel's launches: the tuner's ~256 MiB problem of an odd row
# count (781 bf16 columns) one program per row, its 2048 rows two per program, its 16 rows
# four, one row, and a persistent grid of 132 SMs x 8 programs
BATCHES = ((171853, 171853), (2048, 1024), (16, 4), (1, 1), (32768, 1056))


class _TargetOnly:
    """Triton's driver as its binder needs it: the H100/H200's target, no CUDA call."""

    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)


class _Tensor:
    """A tensor as Triton's binder specialises it: its dtype and its address (16-byte aligned)."""

    def __init__(self, dtype, address: int):
        self.dtype, self._address = dtype, address

    def data_ptr(self) -> int:
        return self._address


def batch_keys(fn, sig, const, warps) -> int:
    """How many binaries Triton keeps for a row kernel launched on BATCHES: the number of
    distinct specialisations its binder (what its launch keys the binary by) gives them."""
    import torch
    from triton.runtime.driver import driver
    driver.set_active(_TargetOnly())   # a target, no GPU: what the binder needs
    binder = fn.create_binder()[-1]
    const = {k: v for k, v in with_defaults(fn, const).items() if k != "maxnreg"}
    keys = set()
    for rows, programs in BATCHES:
        values = {"rows": rows, "programs": programs, "cols": 4096}
        args = [_Tensor({"bf16": torch.bfloat16, "fp32": torch.float32}[sig[name][1:]], 1 << 20)
                if sig[name].startswith("*") else values.get(name, 1e-5) for name in fn.arg_names if name in sig]
        _, specialisation, _ = binder(*args, num_warps=warps, **const)
        keys.add(repr(specialisation))
    return len(keys)


def report() -> dict:
    out = {}
    entries = kernels()
    for name, fn, sig, const, warps, aligned, vector in entries + one_program_per_tile(entries):
        const = {k: v for k, v in const.items() if k in fn.arg_names or k == "maxnreg"}   # the chain takes no PREFETCH
        name, _, tile = name.partition(":")
        name = f"{name}:{sig.get('x_ptr') or sig.get('a_ptr') or sig.get('p_ptr')}{':' + tile if tile else ''}"
        try:
            ops, local = compile_sm90(fn, sig, const, warps, aligned)
            out[name] = {"ops": dict(ops), "local": local, "vector": vector, "kernel": fn.__name__,
                         "rows": const.get("ROWS"), "even": const.get("EVEN")}
            if {"rows", "programs"} <= set(sig):
                out[name]["batch_keys"] = batch_keys(fn, sig, const, warps)
        except Exception as e:  # noqa: BLE001 - reported, and failed by the test
            out[name] = {"error": f"{type(e).__name__}: {e}", "kernel": fn.__name__}
    return out


if __name__ == "__main__":
    os.environ.pop("TRITON_INTERPRET", None)
    json.dump(report(), sys.stdout)
