"""The run's settings read from its config, each bad value refused before any case with one
line naming the key and what to give (harness.errors.ConfigError: exit 2), and ``harness --help``."""
from __future__ import annotations

import os
import re
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from harness import plan as planning
from harness.errors import ConfigError
from harness.runner import Settings
from harness.sinks.mlflow import uri_problem as tracking_uri_problem
from harness.timing import TimingBudget

LIST_KEYS = ("op", "impl", "variant", "dtype")   # op: a list selects several configs of the group


def normalize_argv(argv: list[str]) -> list[str]:
    """Without -m, ``impl=eager,torch_compile`` means the list [eager,torch_compile] (Hydra
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
        roof_max_age_s=float(cfg.roof.max_age_s), invocation_id=invocation_id)


def processes_of(cfg: DictConfig) -> int:
    """``processes``: how many fresh worker processes each case runs in (harness.processes)."""
    value = cfg.get("processes", 1)
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 0
    if isinstance(value, bool) or n < 1 or str(n) != str(value).strip():
        raise ConfigError(f"processes={value!r}: give a whole number >= 1 (1: each case in the run's one "
                          "worker; 3: each case in three fresh ones, their medians merged)")
    if n > 1 and not cfg.isolate:
        raise ConfigError(f"processes={n} needs worker processes: drop isolate=false")
    return n


def seed_of(cfg: DictConfig) -> int | None:
    """``seed``: a whole number, or null for a fresh one."""
    value = cfg.get("seed")
    if value is None:
        return None
    if isinstance(value, bool) or not str(value).strip().lstrip("-").isdigit():
        raise ConfigError(f"seed={value!r}: give a whole number (e.g. seed=1234), or seed=null for a fresh one")
    # torch.Generator takes a 64-bit seed, and each case's input sets add up to ~1100 to it
    # (runner.py): a signed 64-bit base keeps every one of them in range, where a larger one
    # made every case an ERROR record ("Overflow when unpacking long long") and exit 0.
    if not SEED_MIN <= int(value) <= SEED_MAX:
        raise ConfigError(f"seed={value}: give a whole number from {SEED_MIN} to {SEED_MAX} (a signed 64-bit "
                          "integer), or seed=null for a fresh one")
    return int(value)


SEED_MIN, SEED_MAX = -2**63, 2**63 - 1


def case_timeout_of(cfg: DictConfig) -> float:
    value = cfg.get("case_timeout_s")
    try:
        t = float(value)
    except (TypeError, ValueError):
        t = -1.0
    if isinstance(value, bool) or not t > 0:
        raise ConfigError(f"case_timeout_s={value!r}: give the seconds a case may take, a number > 0 "
                          "(default 900)")
    return t


FLAGS = ("isolate", "strict", "roof.cache")   # true or false: any other word would read as true
ROOF_MIN_BYTES = 1 << 20


def check_values(cfg: DictConfig) -> None:
    """The keys a typo would otherwise turn into another setting or a traceback: the flags
    (Python reads strict=no as true), roof.bytes (0 drops the roof, unsaid) and roof.max_age_s."""
    for key in FLAGS:
        value = OmegaConf.select(cfg, key)
        if not isinstance(value, bool):
            got = f" (a {type(value).__name__}: an interpolation must give a boolean)" if isinstance(value, str) \
                and value.lower() in ("true", "false") else ""
            raise ConfigError(f"{key}={value!r}{got}: give true or false")
    value = cfg.roof.bytes
    if isinstance(value, bool) or not isinstance(value, int) or value < ROOF_MIN_BYTES:
        raise ConfigError(f"roof.bytes={value!r}: give the bytes of each roof kernel's buffer, a whole number "
                          f">= {ROOF_MIN_BYTES} (default 1073741824: far beyond the caches)")
    value = cfg.roof.max_age_s
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or value == float("inf"):
        raise ConfigError(f"roof.max_age_s={value!r}: give the seconds a measured roof is reused, a number >= 0 "
                          "(default 86400; 0 measures it again each run)")


def check_tracking_uri(cfg: DictConfig) -> None:
    """A tracking.uri MLflow has no store for, refused before any case (it ran every case, then
    printed an upload command that could never work)."""
    uri = OmegaConf.select(cfg, "tracking.uri") if OmegaConf.select(cfg, "tracking.enabled") else None
    if uri and (problem := tracking_uri_problem(str(uri))):
        raise ConfigError(f"tracking.uri: {problem}, or tracking=none (the tracking config's default comes from "
                          "$MLFLOW_TRACKING_URI where it is set)")


def help_text() -> str:
    """What the tool does, every key of conf/config.yaml with its meaning (its comment there),
    the config groups and their choices, and examples."""
    groups = {g: sorted(p.stem for p in (planning.CONF_DIR / g).glob("*.yaml")) for g in ("op", "sweep", "tracking")}
    lines = ["harness: compare GPU kernel implementations across frameworks.", "",
             "Runs every implementation of the chosen ops on the same inputs and records, per case,",
             "correctness against float64, determinism, batch invariance and GB/s against the roof",
             "measured on this device (JSONL in the run folder, MLflow, a table on the console).", "",
             "usage: harness op=OP [key=value ...]     (harness -m ... sweeps, one job per value)", "",
             "config groups:"]
    keys, section = [], ""
    for line in (planning.CONF_DIR / "config.yaml").read_text().splitlines():
        body, _, meaning = line.partition("#")
        key, colon, value = body.strip().lstrip("- ").partition(":")
        if not colon or line.startswith("#"):
            continue
        if not line.startswith(" "):
            section = key if not value.strip() else ""
        if section == "defaults" and key in groups:
            lines.append(f"  {key:<22} {meaning.strip()}; choices: {', '.join(groups[key])}")
        elif section not in ("defaults", "hydra") and meaning.strip() and value.strip():
            name = f"{section}.{key}" if line.startswith(" ") else key
            value, meaning = value.strip(), meaning.strip()
            if env := re.fullmatch(r"\$\{oc\.env:(\w+),(.*)\}", value):   # a default the environment may set
                value, meaning = env.group(2), f"{meaning} (env {env.group(1)})"
            keys.append(f"  {name + '=' + value:<38} {meaning}")
    keys += [f"  {'tracking.uri=...':<38} the MLflow store or server, in place of the tracking config's",
             f"  {'ops.<op>.params.<name>=...':<38} an op's parameter (conf/op/<op>.yaml), e.g. ops.rmsnorm.params.eps=1e-5"]
    lines += ["", "keys:", *keys]
    lines += ["", "examples:",
              "  harness op=rmsnorm impl=all                      every rmsnorm impl usable here",
              "  harness op=all impl=eager sweep=smoke            every op, eager PyTorch, small shapes",
              "  harness op=softmax impl=[triton,liger] dtype=bf16 shapes=[[4096,4096]]",
              "  harness -m op=rmsnorm,softmax impl=triton        a multirun: one job per op", "",
              "Bad values get an error naming the key and the choices, exit 2. Hydra's own help: --hydra-help."]
    return "\n".join(lines)


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
