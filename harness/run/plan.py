"""From the config to the list of cases, or a ConfigError naming the problem and the choices.

A case is (op, impl, variant, dtype, shape). Impls named explicitly must be usable here
(else an error: a GPU-only impl asked for on a CPU machine is a mistake to report, not to
skip); ``impl=all`` takes every impl of the op and records the unusable ones as skipped,
with the reason.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import OmegaConf, open_dict

from harness import registry
from harness.run.device import memory_bytes
from harness.commands import schema
from harness.errors import ConfigError, unknown
from harness.run.runner import DTYPES, CaseSpec

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
DTYPE_ALIASES = {"float32": "float32", "fp32": "float32", "f32": "float32", "float": "float32",
                 "bfloat16": "bfloat16", "bf16": "bfloat16",
                 "float16": "float16", "fp16": "float16", "f16": "float16", "half": "float16"}
SWEEPS = ("smoke", "default", "full")


def resolve_sweep(cfg, device: torch.device) -> None:
    """``sweep=auto``: the default sweep on a GPU, the smoke sweep on a CPU."""
    if str(cfg.sweep.get("name")) != "auto":
        return
    chosen = "default" if device.type == "cuda" else "smoke"
    with open_dict(cfg):
        OmegaConf.update(cfg, "sweep", OmegaConf.load(CONF_DIR / "sweep" / f"{chosen}.yaml"), merge=True)
    if device.type != "cuda":   # shapes= replaces the sweep's shapes: then only its sampling is chosen
        print(f"harness: sweep=auto chose the {chosen} sweep on {device} "
              + ("(its sampling; your shapes= replace its shapes)" if cfg.get("shapes") is not None
                 else "(sweep=default runs the GPU-sized shapes)"))
# Bytes a case needs besides its inputs and output, per output element: the float64
# reference, error terms and masks of the checks, and the determinism bit copies.
CHECK_BYTES_PER_OUTPUT = 8 * 8
# An interpreter (Triton's, on a CPU) runs a kernel as numpy, a block at a time: it is for
# correctness on small shapes; 64 MiB of traffic already takes minutes per case.
INTERPRETER_MAX_BYTES = 64 << 20


def as_list(value) -> list[str]:
    """'a', 'a,b', ['a', 'b'] -> ['a', 'b'] (None -> [])."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value, resolve=True)
    if isinstance(value, (list, tuple)):
        out = []
        for v in value:
            out += as_list(v) if isinstance(v, str) else [str(v)]
        return out
    return [str(value)]


def parse_shapes(value) -> list[tuple[int, ...]] | None:
    if value is None:
        return None
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value, resolve=True)
    if isinstance(value, int):
        value = [[value]]
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(f"shapes={value!r}: give a list of shapes, e.g. shapes=[[4096,4096]] "
                          "or shapes=[[1000003]]")
    shapes = []
    for s in value:
        s = [s] if isinstance(s, int) else s
        if not isinstance(s, (list, tuple)) or not all(isinstance(n, int) for n in s):
            raise ConfigError(f"shape {s!r} is not a list of integers, e.g. [4096,4096]")
        shapes.append(tuple(s))
    return shapes


@dataclass
class Plan:
    device: torch.device
    sweep: str
    cases: list[CaseSpec]

    @property
    def runnable(self) -> list[CaseSpec]:
        return [c for c in self.cases if not c.skip_reason]


def build(cfg, device: torch.device) -> Plan:
    all_ops = registry.ops()
    frameworks = registry.frameworks()
    for fw in frameworks.values():
        fw.prepare(device)

    # --- ops: the op config group (conf/op/<op>.yaml) fills cfg.ops.<op> ---
    selected = OmegaConf.to_container(cfg.get("ops") or {}, resolve=True)
    op_names = list(selected)
    if not op_names:
        raise ConfigError(f"no op given; add op=<name>; valid: all, {', '.join(all_ops)}")
    for name in op_names:
        if name not in all_ops:
            raise ConfigError(f"conf/op has a config for {name!r}, but impls/{name}/ defines no op "
                              f"of that name; ops: {', '.join(all_ops)}")

    # --- sweep, dtypes ---
    sweep = str(cfg.sweep.name)
    if sweep not in SWEEPS:
        raise unknown("sweep", sweep, SWEEPS)
    dtypes = []
    for d in as_list(cfg.dtype):
        if d.lower() not in DTYPE_ALIASES:
            raise unknown("dtype", d, DTYPE_ALIASES)
        dtypes.append(DTYPE_ALIASES[d.lower()])
    if not dtypes:
        raise ConfigError("dtype is empty; valid: float32, bfloat16, float16 (or fp32, bf16, fp16)")
    dtypes = list(dict.fromkeys(dtypes))
    user_shapes = parse_shapes(cfg.get("shapes"))
    if user_shapes is not None:
        user_shapes = list(dict.fromkeys(user_shapes))   # a shape given twice runs once

    # --- impls and variants ---
    impl_names = list(dict.fromkeys(as_list(cfg.impl)))
    take_all = impl_names == ["all"]
    modules = {op: registry.impl_modules(op) for op in op_names}
    known_impls = sorted({m for ms in modules.values() for m in ms})
    if not impl_names:
        raise ConfigError(f"no impl given; valid: all, {', '.join(known_impls)}")
    if not take_all:
        for name in impl_names:
            if name not in known_impls:
                raise unknown("impl", name, ["all", *known_impls])
            reason = frameworks[name].unusable(device) if name in frameworks else None
            if reason:
                raise ConfigError(f"impl {name!r} cannot run on {device}: {reason}. "
                                  f"Choose another impl or device (impl=all skips it with this reason).")
        missing = [n for n in impl_names if not any(n in modules[op] for op in op_names)]
        if missing:
            raise ConfigError(f"impl {missing[0]!r} implements none of {', '.join(op_names)}; "
                              + "; ".join(f"{op}: {', '.join(modules[op])}" for op in op_names))
    variant_names = list(dict.fromkeys(as_list(cfg.variant)))
    take_all_variants = variant_names in ([], ["all"])
    known_variants = {registry.NO_VARIANT} | {v for op in op_names for v in all_ops[op].variants}

    mem = memory_bytes(device)
    cases: list[CaseSpec] = []
    not_loaded: dict[str, str] = {}   # impls not imported here, whose variants are not known
    for op_name in op_names:
        spec_cls = all_ops[op_name]
        opcfg = selected[op_name] or {}
        params = dict(opcfg.get("params") or {})
        try:
            spec = spec_cls(**params)
        except (TypeError, ValueError) as e:   # e.g. ops.rmsnorm.params.eps=abc: float() refuses it
            given = ", ".join(f"ops.{op_name}.params.{k}={v!r}" for k, v in params.items())
            raise ConfigError(f"op {op_name} cannot take {given}: {e} (conf/op/{op_name}.yaml has its "
                              "parameters and their defaults)") from None
        if user_shapes is not None:
            shapes = user_shapes
        else:
            presets = opcfg.get("shapes") or {}
            if sweep not in presets:
                raise ConfigError(f"conf/op/{op_name}.yaml has no shapes for sweep {sweep!r}; "
                                  f"it has: {', '.join(presets)}")
            shapes = [tuple(s) for s in presets[sweep]]
        try:
            shapes = [spec.validate_shape(s) for s in shapes]
        except ValueError as e:
            ranks = {all_ops[o].ndim for o in op_names}
            mixed = "" if user_shapes is None or len(ranks) == 1 else (
                "; shapes= applies to every op given, and these take " + " and ".join(
                    f"{n}-D ({', '.join(o for o in op_names if all_ops[o].ndim == n)})" for n in sorted(ranks))
                + ": run each rank apart")
            raise ConfigError(f"{e}" + ("" if user_shapes is None else " (from shapes=...)") + mixed) from None

        wanted = modules[op_name] if take_all else [n for n in impl_names if n in modules[op_name]]
        usable, unusable = [], {}
        for name in wanted:
            reason = frameworks[name].unusable(device) if name in frameworks else \
                f"no framework named {name!r} in impls/_frameworks/"
            if reason:
                unusable[name] = reason
            else:
                usable.append(name)
        impls, failures = registry.load_impls(op_name, usable)
        for f in failures:
            unusable[f.impl] = f.reason
        variants_of = {}
        for i in impls:
            variants_of.setdefault(i.impl, []).append(i.variant)
            known_variants.add(i.variant)
        for name in unusable:   # unknown variants: one record per impl and dtype/shape
            variants_of[name] = [registry.NO_VARIANT]
        not_loaded.update(unusable)

        # Shape-major: every impl and variant of one (dtype, shape) runs back to back, so
        # that what is compared is measured seconds apart, not a sweep apart (a 5 us
        # case moves 2-6% between device calls; docs/methodology.md).
        # A variant filter picks among an impl's variants; an impl that has only its one
        # unnamed version ('-') runs as it is: variant=on_chip compares on_chip with the peers.
        runs = [(name, variant) for name in wanted for variant in variants_of.get(name, [])
                if take_all_variants or variant in variant_names
                or variants_of[name] == [registry.NO_VARIANT]]
        for dtype in dtypes:
            for shape in shapes:
                for name, variant in runs:
                    interpreted = name in frameworks and frameworks[name].interpreted(device)
                    skip = unusable.get(name)
                    if skip is None and interpreted:
                        skip = _too_big_to_interpret(spec, shape, dtype)
                    if skip is None:
                        skip = _too_big(spec, shape, dtype, mem, device, user_shapes is not None)
                    cases.append(CaseSpec(op_name, name, variant, dtype, shape, params, skip))
    for v in ([] if take_all_variants else variant_names):
        if v not in known_variants:
            # The variants of an impl that cannot run here are not known (its module is not
            # imported): say so, or variant=idiomatic on a CPU reads as a typo.
            unlisted = "" if not not_loaded else (
                f" (not listed: the variants of {', '.join(sorted(not_loaded))}, which cannot run on {device}; "
                f"impl={','.join(sorted(not_loaded))} says why)")
            raise ConfigError(f"{unknown('variant', v, ['all', *sorted(known_variants)])}{unlisted}")
    if not cases:
        raise ConfigError(f"nothing to run: no impl of {', '.join(op_names)} has variant "
                          f"{', '.join(variant_names)}")
    return Plan(device, sweep, cases)


def from_overrides(overrides: list[str], device: torch.device):
    """(config, plan) for Hydra overrides given as on the harness's command line, for the
    commands that plan as the harness does (harness-tune, harness-nvbench)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from harness.commands.options import normalize_argv
    if GlobalHydra.instance().is_initialized():   # a job of harness-tune -m: Hydra holds this config dir
        cfg = compose("config", overrides=normalize_argv(overrides))
    else:
        with initialize_config_dir(str(CONF_DIR), version_base=None):
            cfg = compose("config", overrides=normalize_argv(overrides))
    resolve_sweep(cfg, device)
    return cfg, build(cfg, device)


def warm(plan: Plan, frameworks: dict) -> set[str]:
    """Let each framework start, in the background, the builds its runnable cases need
    (Framework.warm), and put those frameworks' cases last within each (op, dtype, shape),
    so that the other impls of the first shapes run while the builds go on, and once a build
    is over the cases compared run back to back (harness.run.session holds a case back while
    its build goes on). The frameworks that started something."""
    by_impl: dict[str, list[CaseSpec]] = {}
    for case in plan.runnable:
        by_impl.setdefault(case.impl, []).append(case)
    warming = set()
    for name, cases in by_impl.items():
        fw = frameworks.get(name)
        try:
            if fw is not None and fw.warm(plan.device, cases):
                warming.add(name)
        except Exception as e:  # noqa: BLE001 - the bind builds instead, and says what fails
            print(f"harness: {name}: could not start its build early ({type(e).__name__}: {e}); "
                  "it builds when its first case binds", flush=True)
    if warming:
        plan.cases = builds_last(plan.cases, warming)
    return warming


def builds_last(cases: list[CaseSpec], warming: set[str]) -> list[CaseSpec]:
    """``cases`` with those of the ``warming`` impls after the others of the same (op, dtype,
    shape), the order otherwise kept."""
    out: list[CaseSpec] = []
    group: list[CaseSpec] = []
    for case in cases + [None]:
        same = case is not None and group and (case.op, case.dtype, case.shape) == (group[0].op, group[0].dtype,
                                                                                    group[0].shape)
        if group and not same:
            out += [c for c in group if c.impl not in warming] + [c for c in group if c.impl in warming]
            group = []
        if case is not None:
            group.append(case)
    return out


# On a CPU a case of this many bytes moved takes minutes (its checks, 5-20 repeated launches
# and the float64 reference in the full sweep): rmsnorm fp32 32768x4096 (1 GiB) had not
# finished after 4 min on CI's 2-core machine, and each sweep holds several such cases per dtype.
CPU_SLOW_BYTES = 256 << 20


def slow_on_cpu(plan: Plan) -> str | None:
    """What a CPU run of GPU-sized shapes (sweep=default or full, or shapes= given so) will
    cost, said before it starts; None on a GPU or where every case is small."""
    if plan.device.type == "cuda":
        return None
    ops = registry.ops()
    sizes = [sum(ops[c.op](**c.params).bytes_moved(c.shape, DTYPES[c.dtype])) for c in plan.runnable]
    slow = sum(1 for b in sizes if b >= CPU_SLOW_BYTES)
    if not slow:
        return None
    return (f"{slow} of the {len(sizes)} cases to run move {CPU_SLOW_BYTES >> 20} MiB or more (up to "
            f"{max(sizes) / 2**20:.0f} MiB): on a CPU each takes minutes, the run may take hours; sweep=smoke "
            f"(the CPU's default) or shapes=[[...]] checks correctness in seconds")


def _too_big_to_interpret(spec, shape, dtype: str) -> str | None:
    r, w = spec.bytes_moved(shape, DTYPES[dtype])
    if r + w <= INTERPRETER_MAX_BYTES:
        return None
    return (f"shape {list(shape)} moves {(r + w) / 2**20:.0f} MiB: too large for an interpreter on a CPU "
            f"(limit {INTERPRETER_MAX_BYTES >> 20} MiB); its correctness is checked on smaller shapes "
            "(sweep=smoke), its speed only on a GPU")


def _too_big(spec, shape, dtype: str, mem: int, device, user_given: bool) -> str | None:
    r, w = spec.bytes_moved(shape, DTYPES[dtype])
    out_elems = max(w // DTYPES[dtype].itemsize, 1)
    # twice the operands, the checks' per-element bytes, and the contract's copies: the
    # inputs' snapshot, their refill and its restore copy (3 r), the output's copy (w)
    need = 2 * (r + w) + 3 * r + w + out_elems * CHECK_BYTES_PER_OUTPUT
    if need <= mem:
        return None
    msg = (f"shape {list(shape)} in {dtype} needs ~{need / 2**30:.1f} GiB for inputs, output and "
           f"checks; {device} has {mem / 2**30:.1f} GiB free")
    if user_given:
        raise ConfigError(msg + "; choose smaller shapes")
    return msg


schema.register()   # before anything composes conf/ (its defaults list names the schema)
