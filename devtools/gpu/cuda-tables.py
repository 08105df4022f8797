#!/usr/bin/env python3
"""CUDA beside Triton, from the harness's records (JSONL files of runs with both impls):

1. each case's fastest passing CUDA and Triton variant (negative controls left out), CUDA's
   config, and the CUDA/Triton speed ratio (Triton's median over CUDA's: above 1, CUDA is
   faster; issue #34 asks 0.97 or more);
2. each CUDA record's tuning table by trip: every candidate's group, packs, threads and
   trip, its times on the tuner's three problems, its registers where known (``--regs``:
   cuobjdump -res-usage of the built library, demangled) and its bits' digest, the chosen
   one marked; under it, the fastest candidate of each trip and whether the candidates of
   one group wrote the same bits whatever their packs, block and trip (they must:
   rows.cuh, bit-neutral), and the tuner's own bit_neutral_changed_bits where it found any.

    devtools/gpu/cuda-tables.py OUT/*.jsonl [--regs OUT/res-usage.txt]
"""
import argparse
import json
import re
import sys
from pathlib import Path

AXES = ("group", "packs", "threads", "trip")
KERNELS = {"rmsnorm": "rmsnorm_rows", "layernorm": "layernorm_rows", "softmax": "softmax_rows",
           "rmsnorm_silu_mul_add": "chain_rows"}
TYPES = {"float32": "float", "bfloat16": "__nv_bfloat16", "float16": "__half"}
VARIANT_CODES = {"layernorm": {"welford": 0, "two_pass": 1, "naive": 2},
                 "softmax": {"three_pass": 0, "online": 1, "on_chip": 2}}


def records(paths: list[str]) -> list[dict]:
    out = []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if line.strip():
                out.append(json.loads(line))
    return out


def case_of(r: dict) -> tuple:
    return r["op"], "x".join(map(str, r["shape"])), r["dtype"]


def fastest(found: list[dict], impl: str) -> dict | None:
    """The impl's fastest passing record of a case (negative controls are not contenders)."""
    ok = [r for r in found if r.get("impl") == impl and r.get("status") == "ok" and not r.get("negative_control")
          and r.get("median_us")]
    return min(ok, key=lambda r: r["median_us"], default=None)


def short(config: dict) -> str:
    return " ".join(f"{k}={config[k]}" for k in AXES if k in config) or "-"


def ratios(found: list[dict]) -> list[str]:
    by_case: dict[tuple, list] = {}
    for r in found:
        if r.get("impl") in ("cuda", "triton"):
            by_case.setdefault(case_of(r), []).append(r)
    lines = ["| op | shape | dtype | CUDA variant | CUDA config | CUDA us | % roof | Triton variant | Triton us | "
             "% roof | CUDA/Triton |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for case, rs in sorted(by_case.items()):
        c, t = fastest(rs, "cuda"), fastest(rs, "triton")

        def cells(r):
            if r is None:
                return ["-", "-", "-"]
            return [r["variant"], f"{r['median_us']:.1f}", f"{r.get('pct_roof') or 0:.1f}"]
        cuda, triton = cells(c), cells(t)
        ratio = f"{t['median_us'] / c['median_us']:.3f}" if c and t else "-"
        config = short(c.get("impl_config") or {}) if c else "-"
        not_ok = sorted({f"{r['impl']} {r['variant']}: {r['status']}" for r in rs
                         if r.get("status") != "ok" and not r.get("negative_control")})
        lines.append(f"| {' | '.join(case)} | {cuda[0]} | {config} | {cuda[1]} | {cuda[2]} | {' | '.join(triton)} | "
                     f"{ratio} |" + (f" ({'; '.join(not_ok)})" if not_ok else ""))
    return lines


def registers(path: str | None) -> dict[str, int]:
    """Demangled kernel name -> registers, from cuobjdump -res-usage piped through c++filt."""
    if not path or not Path(path).exists():
        return {}
    found, name = {}, None
    for line in Path(path).read_text().splitlines():
        if m := re.match(r"\s*Function (.*):\s*$", line):
            name = m.group(1).strip()
        elif name and (m := re.search(r"REG:(\d+)", line)):
            found[name] = int(m.group(1))
            name = None
    return found


def kernel_registers(regs: dict[str, int], r: dict, c: dict) -> str:
    """Registers of a candidate's kernel, for whole rows (every tuning problem's rows are)."""
    kernel = KERNELS.get(r["op"])
    if not regs or kernel is None or r["dtype"] not in TYPES:
        return "-"
    args = [TYPES[r["dtype"]], str(c.get("packs", 0)), str(c.get("trip", 0))]
    if r["op"] in VARIANT_CODES:
        args.append(str(VARIANT_CODES[r["op"]].get(r["variant"], "?")))
    want = f"hk::{kernel}<{', '.join(args)}, true>"
    hits = [n for n, v in regs.items() if want in n]
    return str(regs[hits[0]]) if hits else "-"


def tables(found: list[dict], regs: dict[str, int]) -> list[str]:
    lines = []
    for r in sorted(found, key=lambda r: (case_of(r), r["variant"])):
        table = r.get("tuning") or {}
        candidates = table.get("candidates") or []
        if r.get("impl") != "cuda" or not candidates:
            continue
        chosen = {k: v for k, v in (r.get("impl_config") or {}).items() if k in AXES}
        lines += ["", f"### {' '.join(case_of(r))} cuda {r['variant']}: chose {short(chosen)} "
                      f"(tuning {table.get('source')}, problems {table.get('problems')})",
                  "| group | packs | threads | trip | regs | large us | mid us | small us | bits | |",
                  "|---|---|---|---|---|---|---|---|---|---|"]

        def order(c):
            return c.get("group", 0), c.get("packs", 0), c.get("trip", 0), c.get("threads", 0)
        for c in sorted(candidates, key=order):
            mark = "chosen" if all(c.get(k) == v for k, v in chosen.items()) and chosen else ""
            times = [f"{c[p]:.1f}" if isinstance(c.get(p), (int, float)) else "-" for p in ("us", "mid_us", "small_us")]
            lines.append(f"| {c.get('group')} | {c.get('packs')} | {c.get('threads')} | {c.get('trip', '-')} | "
                         f"{kernel_registers(regs, r, c)} | {' | '.join(times)} | {str(c.get('bits'))[:8]} | {mark} |")
        by_trip: dict = {}
        for c in candidates:
            if c.get("packs") == 0 and isinstance(c.get("us"), (int, float)):
                best = by_trip.get(c.get("trip"))
                if best is None or c["us"] < best["us"]:
                    by_trip[c.get("trip")] = c
        lines.append("fastest looped by trip: " + (", ".join(
            f"trip {t}: {c['us']:.1f} us ({short(c)})" for t, c in sorted(by_trip.items(), key=lambda kv: str(kv[0])))
            or "none"))
        bits_by_group: dict = {}
        for c in candidates:
            if c.get("bits"):
                bits_by_group.setdefault(c.get("group"), set()).add(c["bits"])
        split = {g: sorted(b) for g, b in bits_by_group.items() if len(b) > 1}
        lines.append(f"bits per group: {'one each (bit-neutral)' if not split else f'DIFFER: {split}'}")
        if table.get("bit_neutral_changed_bits"):
            lines.append(f"TUNER: bit_neutral_changed_bits {table['bit_neutral_changed_bits']}")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="the harness's JSONL files")
    parser.add_argument("--regs", help="cuobjdump -res-usage of the built library, through c++filt")
    args = parser.parse_args(argv)
    found = records(args.results)
    if not found:
        print("cuda-tables: no records")
        return 1
    print("\n".join(ratios(found) + tables(found, registers(args.regs))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
