"""The run's settings read from its config, each bad value refused before any case with one
line naming the key and what to give (harness.errors.ConfigError: exit 2), and ``harness --help``."""
from __future__ import annotations

import dataclasses
import enum
import os
from pathlib import Path

from omegaconf import MISSING, DictConfig, OmegaConf

from harness.run import plan as planning
from harness.commands import schema
from harness.errors import ConfigError
from harness.run.runner import Settings
from harness.records.sinks.mlflow import uri_problem as tracking_uri_problem
from harness.measure.timing import TimingBudget

LIST_KEYS = ("op", "impl", "variant", "dtype")   # op: a list selects several configs of the group


def normalize_argv(argv: list[str]) -> list[str]:
    """Without -m, ``impl=eager,triton`` means the list [eager,triton] (Hydra
    would refuse it as ambiguous). With -m, commas keep their Hydra meaning: a sweep."""
    if any(a in ("-m", "--multirun") for a in argv):
        return argv
    out = []
    for a in argv:
        key, sep, value = a.partition("=")
        if sep and key in LIST_KEYS and "," in value and not value.startswith(("[", "'", '"')):
            a = f"{key}=[{value}]"
        out.append(a)
    return out


def settings_from(cfg: DictConfig, invocation_id: str, seed: int) -> Settings:
    sw = cfg.sweep
    return Settings(
        seeds=int(sw.seeds), base_seed=seed, determinism_runs=int(sw.determinism_runs),
        batch_invariance=bool(sw.batch_invariance), budget=TimingBudget(**sw.timing),
        roof_bytes=int(cfg.roof.bytes), roof_cache=bool(cfg.roof.cache),
        roof_max_age_s=float(cfg.roof.max_age_s), invocation_id=invocation_id,
        frameworks=OmegaConf.to_container(cfg.frameworks, resolve=True, enum_to_str=True))


# The schema (harness.commands.schema) types every key, so a value here has its type; what is left
# to check is its range, before any case.

def processes_of(cfg: DictConfig) -> int:
    """``processes``: how many fresh worker processes each case runs in (harness.run.processes)."""
    n = cfg.processes
    if n < 1:
        raise ConfigError(f"processes={n!r}: {_advice('processes')}")
    if n > 1 and not cfg.isolate:
        raise ConfigError(f"processes={n} needs worker processes: drop isolate=false")
    return n


def seed_of(cfg: DictConfig) -> int | None:
    """``seed``: a whole number, or null for a fresh one."""
    value = cfg.seed
    # torch.Generator takes a 64-bit seed, and each case's input sets add up to ~1100 to it
    # (runner.py): a signed 64-bit base keeps every one of them in range, where a larger one
    # made every case an ERROR record ("Overflow when unpacking long long") and exit 0.
    if value is not None and not SEED_MIN <= value <= SEED_MAX:
        raise ConfigError(f"seed={value}: give a whole number from {SEED_MIN} to {SEED_MAX} (a signed 64-bit "
                          "integer), or seed=null for a fresh one")
    return value


SEED_MIN, SEED_MAX = -2**63, 2**63 - 1


def case_timeout_of(cfg: DictConfig) -> float:
    t = cfg.case_timeout_s
    if not t > 0:
        raise ConfigError(f"case_timeout_s={_number(t)}: {_advice('case_timeout_s')}")
    return t


ROOF_MIN_BYTES = 1 << 20


def check_values(cfg: DictConfig) -> None:
    """roof.bytes (below a MiB the roof says nothing) and roof.max_age_s (nan or inf would
    keep a roof for ever, or never)."""
    if cfg.roof.bytes < ROOF_MIN_BYTES:
        raise ConfigError(f"roof.bytes={cfg.roof.bytes!r}: {_advice('roof.bytes')}")
    value = cfg.roof.max_age_s
    if not value >= 0 or value == float("inf"):
        raise ConfigError(f"roof.max_age_s={_number(value)}: {_advice('roof.max_age_s')}")


def _number(value: float) -> str:
    """A float key's value as it was typed: -1, not -1.0."""
    return str(int(value)) if value.is_integer() else repr(value)


def _advice(key: str) -> str:
    return schema.field_at(schema.current(), key)[0].metadata["advice"]


def check_tracking_uri(cfg: DictConfig) -> None:
    """A tracking.uri MLflow has no store for, refused before any case (it ran every case, then
    printed an upload command that could never work)."""
    uri = OmegaConf.select(cfg, "tracking.uri") if OmegaConf.select(cfg, "tracking.enabled") else None
    if uri and (problem := tracking_uri_problem(str(uri))):
        raise ConfigError(f"tracking.uri: {problem}, or tracking=none (the tracking config's default comes from "
                          "$MLFLOW_TRACKING_URI where it is set)")


def help_text() -> str:
    """What the tool does, the config groups and their choices, every key of the schema with
    its default and its doc (harness.commands.schema), and examples."""
    lines = ["harness: compare GPU kernel implementations across frameworks.", "",
             "Runs every implementation of the chosen ops on the same inputs and records, per case,",
             "correctness against float64, determinism, batch invariance and GB/s against the roof",
             "measured on this device (JSONL in the run folder, MLflow, a table on the console).", "",
             "usage: harness op=OP [key=value ...]     (harness -m ... sweeps, one job per value)", "",
             "config groups:"]
    for group, meaning in schema.GROUPS.items():
        choices = sorted(p.stem for p in (planning.CONF_DIR / group).glob("*.yaml"))
        lines.append(f"  {group:<22} {meaning}; choices: {', '.join(choices)}")
    lines += ["", "keys:"]
    stands_for = None   # a group of keys whose one doc stands for them all (sweep.timing)
    for name, f, kind in schema.walk(schema.current()):
        if stands_for and name.startswith(stands_for + "."):
            continue
        doc, group = f.metadata.get("doc", ""), kind is not None and dataclasses.is_dataclass(kind)
        if group and not doc:
            continue   # roof, sweep, ...: their keys follow
        if group:
            stands_for, name = name, f"{name}.<name>"
        elif name == "ops":
            name = "ops.<op>.params.<name>"
        if choices := schema.choices(kind):
            doc += f" (choices: {', '.join(choices)})"
        lines.append(f"  {name + '=' + _shown(f):<38} {doc}")
    lines += ["", "examples:",
              "  harness op=rmsnorm impl=all                      every rmsnorm impl usable here",
              "  harness op=all impl=eager sweep=smoke            every op, eager PyTorch, small shapes",
              "  harness op=softmax impl=[triton,liger] dtype=bf16 shapes=[[4096,4096]]",
              "  harness -m op=rmsnorm,softmax impl=triton        a multirun: one job per op", "",
              "Bad values get an error naming the key and the choices, exit 2. Hydra's own help: --hydra-help."]
    return "\n".join(lines)


def _shown(f: dataclasses.Field) -> str:
    """A field's default as it is typed on the command line (``...`` where a config group sets it)."""
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "..."
    if value is MISSING or isinstance(value, dict) or dataclasses.is_dataclass(value):
        return "..."
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return yaml_value(value)


def yaml_value(value) -> str:
    return "null" if value is None else "true" if value is True else "false" if value is False else \
        "[" + ", ".join(map(str, value)) + "]" if isinstance(value, list) else str(value)


RUN_FOLDER_KEYS = ("hydra.run.dir", "hydra.sweep.dir")
# conf/config.yaml's run folders, under the working folder: outputs/<date>/<time>, multirun/...
DEFAULT_FOLDERS = {"hydra.run.dir": "outputs", "hydra.sweep.dir": "multirun"}


def check_run_folders(argv: list[str]) -> None:
    """A run folder that cannot be made is a ConfigError naming it: Hydra's mkdir gave a
    traceback, exit 1 (115 lines for a read-only working folder). The folder given on the
    command line, or else the default one under the working folder, is tried by making a
    folder in its nearest existing ancestor and removing it (nothing is left: a command line
    Hydra refuses leaves no folder; root's access() would pass /proc). A folder with an
    interpolation is left to Hydra."""
    given = {}
    for arg in argv:
        key, eq, value = arg.partition("=")
        if key.lstrip("+~") in RUN_FOLDER_KEYS and eq and value:
            given[key.lstrip("+~")] = value
    key = "hydra.sweep.dir" if any(a in ("-m", "--multirun") for a in argv) else "hydra.run.dir"
    if key not in given:
        _probe(key, str(Path(DEFAULT_FOLDERS[key]).absolute() / "run"),
               f"run from a folder you can write, or give {key}=<a folder you can write>")
    for key, value in given.items():
        if "${" not in value:
            _probe(key, value, "give a folder you can write", f"{key}={value}: ")


def _probe(key: str, value: str, advice: str, named: str = "") -> None:
    import tempfile
    there = Path(value).absolute()
    while not there.exists() and there != there.parent:
        there = there.parent
    try:
        if there == Path(value).absolute() and there.is_dir():
            return   # it is there already
        os.rmdir(tempfile.mkdtemp(dir=there, prefix=".harness-probe-"))
    except OSError as e:
        raise ConfigError(f"{named}the run's folder cannot be made in {there} ({type(e).__name__}: "
                          f"{e.strerror or e}); {advice}") from None
