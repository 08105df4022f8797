"""harness-tune: measure launch configs on this GPU and write its table (harness.launch.configs).

    harness-tune op=rmsnorm                        # report: the search's choices against the table
    harness-tune op=all write=true                 # and write them into conf/launch/<gpu>.yaml
    harness-tune op=all min_bytes=268435456        # only the kernels of cases moving that much
    harness-tune op=softmax search=exhaustive out=tune.jsonl

The cases are the harness's own plan (op, impl, variant, dtype, sweep, shapes), for the
frameworks of ours unless ``impl=`` names others. Each case's impl is bound once, on fresh
random inputs, with the search on: every config it asks for is measured by harness.launch.tuner
(its search, its rules, and its batch-invariance rule: a batch may take only a config that
wrote the bits of the row length's config), its batch's own config too. Then, for each
entry, the table's config and the rule's are timed on the search's ~256 MiB problem beside
the search's choice; a line says each one's time, and CHANGED where the search chose
another config than the table holds. ``write=true`` puts the search's entries in place of
the table's (the other entries stay); ``out=`` keeps the comparison as JSON lines. With
``-m`` each sweep point is a job of Hydra's launcher, keeping its comparison in its own folder
(``harness-nightly --tune`` lists the changed entries as findings). A run never searches: it
reads the table.
"""
from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from hydra.experimental.callback import Callback

from harness.launch import configs, rowsearch, tuner
from harness.run import progress
from harness.entry import INTERRUPTED_EXIT
from harness.errors import ConfigError

OWN_KEYS = ("write", "out", "search", "min_bytes")
LAST_ROW = 2 ** 31 - 1   # the top of the last batch range: any batch


@dataclass
class Found:
    """What the search found for one table entry (kernel, cols, dtype)."""
    kernel: str
    cols: int
    dtype: str
    tuned: tuner.Tuned
    space: object
    rule: dict
    batches: dict = field(default_factory=dict)   # a batch's rows -> the config it took (its own, measured)

    def points(self) -> dict[int, dict]:
        """Every batch size whose config the search decided, with that config: the tuning
        problems' and each measured batch's."""
        out = {rows: configs.launchable(c) if c else self.tuned.config for rows, c in self.tuned.batches}
        out.update({rows: configs.launchable(c) for rows, c in self.batches.items() if c.get("tuned_for_rows") == rows})
        return out


class Session:
    """harness-tune's: each config_for measures (harness.launch.configs._session)."""

    def __init__(self):
        self.found: dict[tuple, Found] = {}

    def choose(self, kernel, cols, dtype, batch, device, rule, space) -> configs.Choice:
        key = (kernel, cols, dtype)
        s = space()
        if isinstance(s, rowsearch.RowSpace):
            tuned = rowsearch.tune_rows(key, s)
            config, _ = rowsearch.for_batch(tuned, key, batch, s)
        else:
            tuned = tuner.tune(key, s.configs, s.bind, s.label, s.unrunnable, s.precompile)
            config = tuned.config
        found = self.found.setdefault(key, Found(kernel, cols, dtype, tuned, s, dict(rule)))
        if batch is not None:
            found.batches[batch] = config
        return configs.Choice(tuner.config_of(config), "harness-tune")


def ranges(points: dict[int, dict], main: dict) -> list[tuple[int, int, dict]]:
    """Batch ranges from the batch sizes whose config was decided: each size serves the
    batches nearer to it than to its neighbours on a log scale (as the tuner's Tuned.for_rows
    reads its problems), the ranges of the row length's own config left out (it serves
    every batch no range holds), neighbours of one config merged."""
    sizes = sorted(points)
    out: list[tuple[int, int, dict]] = []
    for i, n in enumerate(sizes):
        lo = 1 if i == 0 else math.floor(math.sqrt(sizes[i - 1] * n)) + 1
        hi = LAST_ROW if i == len(sizes) - 1 else math.floor(math.sqrt(n * sizes[i + 1]))
        if out and out[-1][2] == points[n]:
            out[-1] = (out[-1][0], hi, points[n])
        else:
            out.append((lo, hi, points[n]))
    return [r for r in out if r[2] != main and r[0] <= r[1]]


def _measured(found: Found, config: dict | None) -> float | None:
    """``config``'s time on the search's large problem: from the search's own table where it
    measured it, else measured now beside it (None: no config, or it does not run)."""
    if config is None:
        return None
    for c in found.tuned.table.get("candidates", []):
        if tuner.config_of(c) == config and c.get("us") is not None:
            return c["us"]
    s = found.space
    work = tuner.effort()
    try:
        if isinstance(s, rowsearch.RowSpace):
            rows = rowsearch.problems(s)["us"]
            run = s.bind(config, s.scratch(rows), rows)
        else:
            run = s.bind(config)
        return tuner.measure(run, work.large_samples, work.large_seconds, s.unrunnable)
    except (ValueError, TypeError, KeyError) as e:   # a table's config this kernel no longer takes
        print(f"harness-tune: {found.kernel} {found.cols} {found.dtype}: {config} does not run: {e}", file=sys.stderr)
        return None


def compare(found: Found, table: configs.Table | None) -> dict:
    """The search's choice beside the table's config and the rule's, each timed on the
    search's large problem."""
    held = table.lookup(found.kernel, found.cols, found.dtype, None) if table else None
    held_config = held[0] if held else None
    chosen = found.tuned.config
    times = {name: _measured(found, c) for name, c in (("search", chosen), ("table", held_config),
                                                     ("rule", found.rule))}
    return {"kernel": found.kernel, "cols": found.cols, "dtype": found.dtype,
            "search": {"config": chosen, "us": times["search"]},
            "table": {"config": held_config, "us": times["table"]},
            "rule": {"config": found.rule, "us": times["rule"]},
            "changed": held_config != chosen,
            "batches": [[lo, hi, c] for lo, hi, c in ranges(found.points(), chosen)],
            "warnings": warnings(found.tuned.table)}


def warnings(table: dict) -> list[str]:
    """What the search saw go wrong: a switch called bit-neutral that changed the bits (the
    kernel's arithmetic depends on it: none should), candidates that did not run."""
    said = [f"bit-neutral switches changed the bits: {a} vs {b}" for a, b in table.get("bit_neutral_changed_bits", [])]
    candidates = table.get("candidates", [])
    idle = [c for c in candidates if c.get("us") is None]
    if idle:
        said.append(f"{len(idle)} of {len(candidates)} candidates did not run, e.g. {tuner.config_of(idle[0])}")
    return said


def line(c: dict) -> str:
    search = c["search"]["us"]

    def vs(part: str) -> str:
        us = c[part]["us"]
        if us is None:
            return f"{part} -" if c[part]["config"] is None else f"{part} did not run"
        return f"{part} {us:.1f} us ({search / us:.3f})" if search else f"{part} {us:.1f} us"
    head = f"{c['kernel']} {c['cols']} {c['dtype']}: search {search:.1f} us" if search else \
        f"{c['kernel']} {c['cols']} {c['dtype']}: search not timed"
    said = "".join(f"\n    warning: {w}" for w in c.get("warnings", []))
    return f"{head}, {vs('table')}, {vs('rule')}{'  CHANGED' if c['changed'] else ''}{said}"


def written(path: Path, gpu: str, comparisons: list[dict], history: str = "") -> str:
    """The table at ``path`` with the search's entries in place of those it measured again, and
    ``history`` (what measured them) added to its history."""
    import yaml
    data = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
    kernels: dict = data.get("kernels") or {}
    for c in comparisons:
        entries = kernels.setdefault(c["kernel"], {})
        stem = f"{c['cols']} {c['dtype']}"
        for key in [k for k in entries if k == stem or k.startswith(stem + " rows ")]:
            del entries[key]
        entries[stem] = {**c["search"]["config"], **({"us": round(c["search"]["us"], 2)} if c["search"]["us"] else {})}
        for lo, hi, config in c["batches"]:
            entries[f"{stem} rows {lo}-{hi}"] = config
    return render(gpu, kernels, [*(data.get("history") or []), *([history] if history else [])])


def _entry_order(key: str) -> tuple:
    parts = key.split()
    lo = int(parts[3].split("-")[0]) if len(parts) > 2 else 0
    return int(parts[0]), parts[1], lo


def render(gpu: str, kernels: dict, history: list[str] = ()) -> str:
    """A table as harness-tune writes it: one line per entry, sorted, for a reviewable diff."""
    import yaml
    lines = [f"# Launch configs for {gpu}: read by every run (harness/launch/configs.py), written by harness-tune.",
             f"gpu: {gpu}", "history:   # what measured the entries, oldest first",
             *(f"  - {yaml.safe_dump(h, default_style=None, width=1 << 20).strip().removesuffix('...').strip()}"
               for h in history), "kernels:"]
    for kernel in sorted(kernels):
        lines.append(f"  {kernel}:")
        for key in sorted(kernels[kernel], key=_entry_order):
            flow = yaml.safe_dump(kernels[kernel][key], default_flow_style=True, sort_keys=False, width=1 << 20)
            lines.append(f"    {key}: {flow.strip()}")
    return "\n".join(lines) + "\n"


def _split(argv: list[str]) -> tuple[dict, list[str]]:
    own, rest = {}, []
    for a in argv:
        key, sep, value = a.partition("=")
        (own.__setitem__(key, value) if sep and key in OWN_KEYS else rest.append(a))
    return own, rest


def _bind_all(cases, device) -> None:
    """Bind each case's impl once on fresh random inputs, the session measuring what it asks."""
    import torch

    from harness import registry
    from harness.run.runner import DTYPES
    ops = registry.ops()
    for spec in cases:
        op = ops[spec.op](**spec.params)
        inputs = op.inputs(spec.shape, DTYPES[spec.dtype], device, seed=0)
        impl = registry.registered()[(spec.op, spec.impl, spec.variant)]
        try:
            impl.bind(**inputs, out=op.make_output(inputs))
        except Exception as e:  # noqa: BLE001 - one impl that cannot bind never stops the others
            print(f"harness-tune: {spec.op} {spec.impl} {spec.variant} {spec.dtype} {list(spec.shape)}: not tuned "
                  f"({type(e).__name__}: {str(e)[:300]})", file=sys.stderr)
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def search(cases, device) -> tuple[Session, bool]:
    """Every case's kernels searched; on a SIGINT the searches done so far are kept (and the
    run is cut: True), so that a time limit still ends with their comparison."""
    session = configs._session = Session()
    try:
        _bind_all(cases, device)
    except KeyboardInterrupt:
        print(f"harness-tune: interrupted (SIGINT): the {len(session.found)} entries searched so far are compared; "
              "no table is written", file=sys.stderr, flush=True)
        return session, True
    finally:
        configs._session = None
    return session, False


def main(argv: list[str] | None = None) -> int:
    own, overrides = _split(sys.argv[1:] if argv is None else argv)
    return _guarded(_multirun if any(a in ("-m", "--multirun") for a in overrides) else _tune, own, overrides)


def _guarded(command, own: dict, overrides: list[str]) -> int:
    """``command(own, overrides)``; a configuration it refuses is one line, exit 2."""
    try:
        return command(own, overrides)
    except ConfigError as e:
        print(f"harness-tune: error: {e}", file=sys.stderr)
        return 2


def _multirun(own: dict, overrides: list[str]) -> int:
    """``-m``: each sweep point is a job of Hydra's launcher (``hydra/launcher=slurm``: a Slurm
    job with a GPU, as harness-nightly --tune asks), with this command's own keys; a job keeps
    its comparison as ``tune.jsonl`` in its own folder. Jobs may run at once, so none writes a
    file another could: no ``out=``, no ``write=true``. A job that kept no comparison fails the
    sweep (exit 1 unless a job's own status says more); why is in its own output (a Slurm job's:
    the sweep folder's .submitit/)."""
    for key in ("out", "write"):
        if key in own and (key, own[key]) != ("write", "false"):
            raise ConfigError(f"{key}={own[key]} with -m: each job keeps its comparison in its own folder and "
                              "writes no table (jobs may run at once); write a table from one run: "
                              "harness-tune op=... write=true")
    import hydra
    from hydra.core.hydra_config import HydraConfig

    from harness.run import multirun  # noqa: F401 - the resolvers conf/config.yaml names job folders by
    from harness.run.plan import CONF_DIR

    codes = []   # the jobs' exit codes where they run in this process (Hydra's basic launcher)

    def job(cfg) -> None:
        hydra_cfg = HydraConfig.get()
        mine = {**own, "out": str(Path(hydra_cfg.runtime.output_dir) / TUNE_FILE)}
        Path(mine["out"]).unlink(missing_ok=True)   # a sweep folder used again: an earlier job's file says nothing
        codes.append(_guarded(_tune, mine, list(hydra_cfg.overrides.task)))

    # the sweep's summary is of comparisons, not records
    sys.argv = [sys.argv[0], *overrides, f"hydra.callbacks.summary._target_={__name__}.Unkept"]
    Unkept.jobs = None   # stays None if the callback never ran or raised (Hydra makes that a warning)
    hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")(job)()
    if Unkept.jobs is None:
        print("harness-tune: the sweep's jobs were not looked over at its end (see Hydra's warning above): "
              "whether each kept a comparison is unknown", file=sys.stderr)
    elif Unkept.jobs:
        print(f"harness-tune: {len(Unkept.jobs)} job(s) kept no comparison: {', '.join(map(str, Unkept.jobs))}; "
              "each job's log (.submitit/ in the sweep folder on Slurm) says why", file=sys.stderr)
    return max(codes, default=0) or int(Unkept.jobs != [])


TUNE_FILE = "tune.jsonl"


class Unkept(Callback):
    """At a sweep's end, in the process that launched it: the jobs without a comparison. A Slurm
    job's exit status stays in Slurm, so its missing file is what says it failed."""
    jobs: list[Path] | None = None

    def on_multirun_end(self, config, **kwargs) -> None:
        from harness.run.multirun import job_folders
        Unkept.jobs = [job for job in job_folders(Path(config.hydra.sweep.dir)) if not (job / TUNE_FILE).exists()]


def _tune(own: dict, overrides: list[str]) -> int:
    from harness.run import device as devices
    from harness import registry
    from harness.measure.nvbench import plan_cases
    if own.get("write", "false") not in ("true", "false"):
        raise ConfigError(f"write={own['write']!r}: give true (write the table) or false (report only)")
    if own.get("search", "fast") not in tuner.SEARCHES:
        raise ConfigError(f"search={own['search']!r}: give one of {', '.join(tuner.SEARCHES)}")
    try:
        min_bytes = int(own.get("min_bytes", 0))
    except ValueError:
        raise ConfigError(f"min_bytes={own['min_bytes']!r}: give a whole number of bytes") from None
    tuner.SEARCH = own.get("search", "fast")
    device = devices.resolve("auto")
    if device.type != "cuda":
        raise ConfigError("harness-tune measures launch configs on a GPU, and this machine has none; run it on the "
                          "GPU whose table it writes")
    named = any(o.startswith("impl=") and o != "impl=all" for o in overrides)
    _, kept = plan_cases(overrides, device, min_bytes, controls=True)
    cases = [spec for spec, _, _ in kept if named or registry.role_of(spec.impl) == registry.OURS]
    gpu = configs.gpu_name(device)
    path = configs.table_path(gpu)
    table = configs.table_for(gpu)
    print(f"harness-tune: {len(cases)} cases on {gpu}; table {path}{'' if table else ' (none yet)'}", flush=True)
    progress.report_to(lambda text: print(f"harness-tune: {text}", flush=True))   # the search's phases
    session, cut = search(cases, device)
    comparisons = [compare(f, table) for f in session.found.values()]
    for c in comparisons:
        print(line(c))
    changed = sum(c["changed"] for c in comparisons)
    print(f"harness-tune: {len(comparisons)} entries measured, {changed} CHANGED against {path.name}")
    if "out" in own:
        with open(own["out"], "w") as f:
            for c in comparisons:
                f.write(json.dumps({**c, "gpu": gpu}) + "\n")
    if own.get("write") == "true" and not cut:
        from harness.measure.provenance import collect
        prov = collect(device)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(written(path, gpu, comparisons, f"{time.strftime('%Y-%m-%d')} harness-tune "
                                f"{' '.join(overrides)} on {prov.get('gpu_uuid')}, commit "
                                f"{(prov.get('git_sha') or '?')[:12]}{' (dirty)' if prov.get('git_dirty') else ''}: "
                                f"{len(comparisons)} entries"))
        print(f"harness-tune: wrote {path}")
    return INTERRUPTED_EXIT if cut else 0


if __name__ == "__main__":
    sys.exit(main())
