#!/usr/bin/env python3
"""Each Triton row kernel with its row and program counts unspecialised (rows.BATCH_ARGS)
beside the same kernel with Triton's default specialisation, whichever of the two ships, one
config at a time, side by side in one process: the bits each writes on the same inputs (must
be equal), and at the large cases the median of each by the tuner's timer, interleaved (the
no-loss rule of issue 32: unspecialised within 1%, before a kernel may take BATCH_ARGS).

    triton-keys-ab.py RESULTS.jsonl [...]   # the chosen configs of these records' large cases
                                            # (>= 256 MiB moved) of rmsnorm, layernorm, softmax
                                            # and the chain, timed A/B; then the bits of the
                                            # multi-row tiles (where the SASS differs)

From the repository root on a GPU host; on a CPU (TRITON_INTERPRET=1) the bits only. One line
per config on stdout."""
import json
import os
import sys

import torch
import triton

from harness.tuner import measure
from impls._frameworks.triton import rows as R
import impls.layernorm.triton as ln
import impls.rmsnorm.triton as rms
import impls.rmsnorm_silu_mul_add.triton as chain
import impls.softmax.triton as sm

LARGE_BYTES = 256 << 20
NOT_CONFIG = ("BLOCK", "on_chip", "tuned_for_rows", "tuned_as", "note", "variant_run", "source")


KERNELS = {"rmsnorm": rms._rmsnorm, "layernorm": ln._layernorm, "softmax": sm._softmax,
           "rmsnorm_silu_mul_add": chain._fused}


def kernels(op: str):
    """(unspecialised, specialised as Triton does by default) of an op's row kernel."""
    fn = KERNELS[op].fn
    return triton.jit(fn, do_not_specialize=R.BATCH_ARGS), triton.jit(fn)


def launcher(kernel, op: str, variant: str, cfg: dict, t: dict, out):
    """A launch of ``kernel`` as the op's bind makes it (impls/<op>/triton.py)."""
    x = t["x"]
    rows, cols = x.shape
    block, on_chip = R.row_block(cols)
    even = on_chip and block == cols
    if op == "rmsnorm":
        return R.row_launcher(kernel, cfg, rows, x.device, x, t["w"], out, rows, cols, 1e-6, BLOCK=block,
                              ON_CHIP=on_chip, EVEN=even)
    if op == "rmsnorm_silu_mul_add":
        return R.row_launcher(kernel, cfg, rows, x.device, x, t["w"], t["u"], t["r"], out, rows, cols, 1e-6,
                              BLOCK=block, ON_CHIP=on_chip, EVEN=even)
    if op == "softmax":
        code = sm.VARIANTS[variant]
        if code == 0 and not on_chip:
            code = 1
        elif code != 0:
            block = min(block, sm.ROW_TILE)
        return R.row_launcher(kernel, cfg, rows, x.device, x, out, rows, cols, VARIANT=code, BLOCK=block,
                              EVEN=code == 0 and block == cols)
    code = ln.VARIANTS["two_pass" if variant == "naive" else variant]
    return R.row_launcher(kernel, cfg, rows, x.device, x, t["w"], t["b"], out, rows, cols, 1e-5, VARIANT=code,
                          BLOCK=block, ON_CHIP=on_chip, EVEN=even, GROUP=min(block, max(1, 16 // x.dtype.itemsize)))


def inputs(shape, dtype, device) -> dict:
    rows, cols = shape
    return {"x": torch.randn(rows, cols, device=device).to(dtype),
            "w": (1 + 0.1 * torch.randn(cols, device=device)).to(dtype),
            "b": (0.1 * torch.randn(cols, device=device)).to(dtype),
            "u": torch.randn(rows, cols, device=device).to(dtype),
            "r": torch.randn(rows, cols, device=device).to(dtype)}


def bits_equal(a, b) -> bool:
    view = {1: torch.int8, 2: torch.int16, 4: torch.int32}[a.element_size()]
    return torch.equal(a.view(view), b.view(view))


def compare(op, variant, cfg, shape, dtype, device, time_it: bool) -> dict:
    t = inputs(shape, dtype, device)
    outs = [torch.full_like(t["x"], float("nan")) for _ in range(2)]
    launches = [launcher(k, op, variant, cfg, t, o) for k, o in zip(kernels(op), outs)]
    for launch in launches:
        launch()
    line = {"op": op, "variant": variant, "dtype": str(dtype).replace("torch.", ""), "shape": list(shape),
            "config": cfg, "same_bits": bits_equal(*outs)}
    if time_it:
        medians = [[], []]
        for _ in range(3):   # interleaved: drift on the GPU falls on both alike
            for i, launch in enumerate(launches):
                medians[i].append(measure(launch, 200, 0.5))
        unspecialised, specialised = (sorted(m)[1] for m in medians)
        line.update(unspecialised_us=round(unspecialised, 3), specialised_us=round(specialised, 3),
                    ratio=round(unspecialised / specialised, 4))
    return line


def large_cases(paths):
    """(op, variant, dtype, shape, config) of each Triton record moving >= 256 MiB."""
    seen = set()
    for path in paths:
        try:
            text = open(path).read()
        except OSError:
            continue
        for row in text.splitlines():
            try:
                r = json.loads(row)
            except ValueError:
                continue
            if r.get("impl") != "triton" or r.get("op") not in KERNELS or not r.get("impl_config"):
                continue
            if r["op"] == "rmsnorm_silu_mul_add" and r["variant"] != "fused":
                continue   # the unfused chain is four 1-D kernels, no row kernel
            if (r.get("bytes") or 0) < LARGE_BYTES:
                continue
            cfg = {k: v for k, v in r["impl_config"].items() if k not in NOT_CONFIG}
            key = (r["op"], r["variant"], r["dtype"], tuple(r["shape"]))
            if key not in seen:
                seen.add(key)
                yield r["op"], r["variant"], getattr(torch, r["dtype"]), tuple(r["shape"]), cfg


def multi_row_tiles(device):
    """Configs whose SASS differs with the counts unspecialised (tiles of several rows;
    LayerNorm's predicated toggle), on a batch of a row count that Triton would specialise
    as a multiple of 16."""
    for cols, rows in ((4096, 2048), (781, 2048)):
        block, on_chip = R.row_block(cols)
        for tile_rows, warps in R.tile_shapes(block, on_chip, 4, 2):
            if tile_rows == 1:
                continue
            base = dict(rows=tile_rows, num_warps=warps, persistent=False, hints="plain", prefetch=False,
                        early=False, ordered=False, loop_block=0)
            yield "rmsnorm", "-", base, (rows, cols)
            yield "layernorm", "welford", base, (rows, cols)
            if cols == block:
                yield "layernorm", "welford", {**base, "early": True, "predicated": True}, (rows, cols)


def main(paths) -> int:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    time_it = device.type == "cuda" and os.environ.get("TRITON_INTERPRET") != "1"
    bad = 0
    for op, variant, dtype, shape, cfg in large_cases(paths):
        line = compare(op, variant, cfg, shape, dtype, device, time_it)
        bad += not line["same_bits"] or line.get("ratio", 1.0) > 1.01
        print(json.dumps(line), flush=True)
    for op, variant, cfg, shape in multi_row_tiles(device):
        line = compare(op, variant, cfg, shape, torch.bfloat16, device, False)
        bad += not line["same_bits"]
        print(json.dumps(line), flush=True)
    print(f"{bad} configs with other bits or more than 1% slower unspecialised", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
