"""The planted-fault suite: impls broken on purpose, each of which the harness must catch
and label with what is wrong, beside every honest impl of the op, none of which it may flag.

    python -m harness.measure.faultsuite                       # on this machine's device
    python -m harness.measure.faultsuite --device cuda --shape 32768x4096 --dtype bfloat16

Faults come from plugin modules (``--plugins``, default the tests' ``broken`` and ``faults``):
each declares ``EXPECTED``, a dict from (op, impl, variant) to an ``Expect``. Every case runs
in an isolated worker (a fault may crash or hang its process). The suite prints one row a
case, then the detection rate (faults labelled as expected) and the false-alarm rate (honest
impls with any status but ok); it exits 1 unless every fault is caught and nothing honest
is flagged.
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
from dataclasses import dataclass
from typing import Any

import torch

DEFAULT_PLUGINS = ("tests.plugins.broken", "tests.plugins.faults")


@dataclass(frozen=True)
class Expect:
    """How the harness must label a planted fault: its status, words its reason must hold,
    or a record field that must hold a value (determinism and batch invariance are fields)."""

    status: str | tuple[str, ...]      # a status, or the statuses any of which will do
    reason: str = ""
    field: str | None = None
    value: Any = None
    gpu_only: bool = False    # needs a GPU to be a fault at all (streams, the L2)

    def __post_init__(self):
        if isinstance(self.status, str):
            object.__setattr__(self, "status", (self.status,))

    def met_by(self, rec: dict) -> bool:
        if rec.get("status") not in self.status or self.reason not in rec.get("reason", ""):
            return False
        return self.field is None or rec.get(self.field) == self.value

    def describe(self) -> str:
        what = "/".join(self.status)
        what += f" '{self.reason}'" if self.reason else ""
        return what + (f", {self.field}={self.value}" if self.field else "")


@dataclass
class Row:
    label: str
    kind: str          # fault | honest
    expected: str
    status: str
    reason: str
    good: bool


def planted(plugins: tuple[str, ...], device: torch.device) -> dict[tuple[str, str, str], Expect]:
    found = {}
    for name in plugins:
        for key, exp in getattr(importlib.import_module(name), "EXPECTED", {}).items():
            if device.type == "cuda" or not exp.gpu_only:
                found[key] = exp
    return found


def honest_impls(op: str, device: torch.device, fault_frameworks: set[str]) -> list[tuple[str, str]]:
    """(impl, variant) of every impl of ``op`` usable here, but the plugins' and negative controls."""
    from harness import registry
    frameworks = registry.frameworks()
    for fw in frameworks.values():
        fw.prepare(device)   # e.g. the interpreter flag, before the impl modules are imported
    names = [n for n in registry.impl_modules(op) if n not in fault_frameworks
             and n in frameworks and frameworks[n].unusable(device) is None]
    impls, _failures = registry.load_impls(op, names)
    controls = registry.ops()[op].negative_controls
    return [(i.impl, i.variant) for i in impls if i.variant not in controls]


def run(device: torch.device, shape: tuple[int, ...], dtype: str, plugins: tuple[str, ...] = DEFAULT_PLUGINS,
        honest: list[str] | None = None, case_timeout_s: float = 30.0, settings=None) -> list[Row]:
    from harness import registry
    from harness.run.runner import CaseSpec, Settings
    from harness.measure.timing import TimingBudget
    from harness.run.worker import IsolatedRunner

    os.environ[registry.PLUGINS_ENV] = ",".join(plugins)   # the workers import them too
    faults = planted(plugins, device)
    frameworks = {k[1] for k in faults}
    ops = {k[0] for k in faults}
    specs = registry.ops()
    # A 1-D op takes the shape's elements, rows x cols: the same bytes, the same odd sizes.
    shaped = {op: shape if specs[op].ndim == len(shape) else (math.prod(shape),) for op in ops}
    cases = [(CaseSpec(op, impl, variant, dtype, shaped[op]), exp)
             for (op, impl, variant), exp in sorted(faults.items())]
    for op in sorted(ops):
        cases += [(CaseSpec(op, impl, variant, dtype, shaped[op]), None)
                  for impl, variant in honest_impls(op, device, frameworks)
                  if honest is None or impl in honest]
    settings = settings or Settings(seeds=2, determinism_runs=10, invocation_id="fault-suite",
                                    budget=TimingBudget(warmup_ms=5, min_samples=20, max_seconds=0.3),
                                    roof_bytes=1 << 30 if device.type == "cuda" else 16 << 20, roof_cache=False)
    runner = IsolatedRunner(device, settings, case_timeout_s)
    rows = []
    try:
        for spec, exp in cases:
            rec = runner.run(spec).as_dict()
            label = f"{spec.op} {spec.impl}" + ("" if spec.variant == "-" else f"/{spec.variant}")
            if exp is None:
                good = rec["status"] == "ok"
                rows.append(Row(label, "honest", "ok", rec["status"], rec["reason"], good))
            else:
                rows.append(Row(label, "fault", exp.describe(), rec["status"], rec["reason"], exp.met_by(rec)))
    finally:
        runner.stop()
    return rows


def rates(rows: list[Row]) -> tuple[float, float]:
    """(detection rate over the faults, false-alarm rate over the honest impls)."""
    faults = [r for r in rows if r.kind == "fault"]
    honest = [r for r in rows if r.kind == "honest"]
    caught = sum(r.good for r in faults) / len(faults) if faults else 1.0
    false = sum(not r.good for r in honest) / len(honest) if honest else 0.0
    return caught, false


def render(rows: list[Row]) -> str:
    width = max(len(r.label) for r in rows)
    lines = [f"{'case':<{width}}  {'kind':<6}  {'verdict':<8}  {'status':<8}  expected / reason"]
    for r in rows:
        verdict = ("caught" if r.good else "MISSED") if r.kind == "fault" else ("clean" if r.good else "FLAGGED")
        lines.append(f"{r.label:<{width}}  {r.kind:<6}  {verdict:<8}  {r.status:<8}  "
                     f"{r.expected}{'' if r.good else ' | got: ' + r.reason[:200]}")
    caught, false = rates(rows)
    n_f = sum(r.kind == "fault" for r in rows)
    n_h = len(rows) - n_f
    lines.append(f"detection rate {caught:.0%} of {n_f} planted faults; false-alarm rate {false:.0%} of {n_h} honest impls")
    return "\n".join(lines)


PROG = "harness-faults"   # the command's name in its messages (pyproject's [project.scripts])


def parse_shape(text: str) -> tuple[int, ...]:
    """ROWSxCOLS; a ValueError naming what is wrong (main: exit 2)."""
    try:
        shape = tuple(int(n) for n in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--shape {text!r} is not ROWSxCOLS (e.g. 64x1000)") from None
    if len(shape) != 2 or min(shape) < 1:
        raise ValueError(f"--shape {text!r}: give ROWSxCOLS (a 1-D op takes ROWS*COLS elements)")
    return shape


def main(argv: list[str] | None = None) -> int:
    from harness.run import device as devices
    from harness.errors import ConfigError
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    p.add_argument("--shape", default=None, help="ROWSxCOLS (default 64x1000 on a CPU, 32768x4096 on a GPU)")
    p.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"],
                   help="default float32 on a CPU, bfloat16 on a GPU")
    p.add_argument("--honest", default=None, help="comma-separated impls to run as honest (default: every one usable)")
    p.add_argument("--plugins", default=",".join(DEFAULT_PLUGINS), help="modules with planted faults (EXPECTED)")
    p.add_argument("--case-timeout", type=float, default=30.0, help="seconds before a case counts as hung")
    p.add_argument("--json", default=None, help="also write the rows to this file")
    a = p.parse_args(argv)
    try:
        dev = devices.resolve(a.device)
    except ConfigError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    gpu = dev.type == "cuda"
    try:
        shape = parse_shape(a.shape or ("32768x4096" if gpu else "64x1000"))
    except ValueError as e:   # a bad argument: exit 2, as every command's (it was SystemExit's 1)
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    dtype = a.dtype or ("bfloat16" if gpu else "float32")
    honest = [h.strip() for h in a.honest.split(",")] if a.honest else None
    rows = run(dev, shape, dtype, tuple(a.plugins.split(",")), honest, a.case_timeout)
    print(render(rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump([r.__dict__ for r in rows], f, indent=1)
    caught, false = rates(rows)
    return 0 if caught == 1.0 and false == 0.0 else 1


if __name__ == "__main__":
    sys.exit(main())
