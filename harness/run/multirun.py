"""A multirun (``harness -m op=copy,scale ...``): job folders named by their overrides, and
one summary of all the jobs at the end.

    multirun/<date>/<time>/0-op=copy/        a job's results.jsonl, table.txt, report
    multirun/<date>/<time>/1-op=scale/
    multirun/<date>/<time>/report.html       every job's records in one report (plots/ too)

(A single run's folder, outputs/<date>/<time>, is claimed here too: run_dir.)

A job folder is its number, then the values of the keys the sweep varies (every override
where they are not known), with '/' replaced and the name cut to fit a file system's limit.
"""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from harness.records import report
from harness.records.sinks import console
from harness.records.sinks.jsonl import read

NAME_LIMIT = 120   # characters of a job folder's name (file systems allow 255 bytes)
_worst_exit = 0   # the worst exit code of this process's multirun jobs (harness.commands.cli)


def keep_exit_code(code: int) -> bool:
    """In a multirun job: keep ``code`` for the end of the sweep (True); else False, and the
    caller exits with it."""
    global _worst_exit
    try:
        from hydra.types import RunMode
        if HydraConfig.get().mode != RunMode.MULTIRUN:
            return False
    except ValueError:   # outside a Hydra job
        return False
    _worst_exit = max(_worst_exit, int(code))
    return True


def job_dir(num, override_dirname: str = "") -> str:
    """``<num>-<overrides>``: the job's overrides (those every job shares left out), safe
    as one path component."""
    items = _task_overrides()
    if items is None:
        items = [i for i in str(override_dirname).split(",") if i]
    swept = _swept_keys()
    name = ",".join(i for i in items if i.split("=", 1)[0].lstrip("+~") in swept) or ",".join(items)
    name = name.replace("/", "_").replace("\\", "_")
    return f"{num}-{name}"[:NAME_LIMIT] if name else str(num)


def _task_overrides() -> list[str] | None:
    try:
        return list(HydraConfig.get().overrides.task)
    except ValueError:   # outside a Hydra job
        return None


def _swept_keys() -> set[str]:
    """The keys the sweep varies (``op`` in ``-m op=copy,scale impl=eager``), read from the
    command line it was started with (a comma outside brackets); none where it is not known."""
    swept = set()
    for arg in sys.argv[1:]:
        key, _, value = arg.partition("=")
        if value and (_top_level_comma(value) or value.startswith(SWEEP_FUNCTIONS)):
            swept.add(key.lstrip("+~"))
    return swept


SWEEP_FUNCTIONS = ("range(", "choice(", "glob(", "interval(")   # Hydra's sweep functions


def _top_level_comma(value: str) -> bool:
    """A comma outside brackets: ``copy,scale`` and ``[[1,2]],[[3]]`` sweep, ``[1,2]`` does not."""
    depth = 0
    for ch in value:
        depth += ch in "[{(" and 1 or 0
        depth -= ch in "]})" and 1 or 0
        if ch == "," and depth == 0:
            return True
    return False


_run_dir: str | None = None   # the folder this process's run claimed (run_dir)


def run_dir(path: str) -> str:
    """A single run's folder: ``path`` (outputs/<date>/<time>), or ``path-2``, ``path-3``, ...
    where another run has it. Two runs started within one second shared a folder: one
    results.jsonl held both, and the table, report and .hydra/ were the last writer's. The
    folder is claimed by creating it (atomic); a process claims one, however often Hydra
    resolves the key."""
    global _run_dir
    n = 1
    while _run_dir is None:
        candidate = path if n == 1 else f"{path}-{n}"
        Path(candidate).parent.mkdir(parents=True, exist_ok=True)
        try:
            Path(candidate).mkdir()
            _run_dir = candidate
        except FileExistsError:
            n += 1
    return _run_dir


OmegaConf.register_new_resolver("harness_job_dir", job_dir, replace=True)
OmegaConf.register_new_resolver("harness_run_dir", run_dir, replace=True)


class Summary(Callback):
    """At the end of a multirun: each job's status counts, and one report of every record."""

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        root = Path(config.hydra.sweep.dir)
        files = sorted(root.glob("*/results.jsonl"), key=lambda p: _job_number(p.parent.name))
        if not files:
            print(f"harness multirun: no results under {root}", file=sys.stderr)
            if _worst_exit:
                sys.exit(_worst_exit)
            return
        records = []
        print(f"\n== multirun: {len(files)} jobs under {root} ==")
        for path in files:
            try:
                recs = read(path)
            except (OSError, ValueError) as e:
                print(f"  {path.parent.name}: unreadable ({e})")
                continue
            records += recs
            counts = Counter(console.status_label(r) for r in recs)
            print(f"  {path.parent.name}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        counts = Counter(console.status_label(r) for r in records)
        print("all jobs: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        try:
            paths = report.write(records, root, title=f"harness multirun: {len(files)} jobs")
            print(f"report: {paths[0]} ({len(paths) - 1} plots)")
        except Exception as e:  # noqa: BLE001 - the jobs' own files stand without it
            print(f"harness multirun: no combined report: {type(e).__name__}: {e}", file=sys.stderr)
        if _worst_exit:
            print(f"harness multirun: a job exited {_worst_exit}", file=sys.stderr)
            sys.exit(_worst_exit)


def job_folders(root: Path) -> list[Path]:
    """A sweep folder's job folders (each holds Hydra's .hydra/), in job order."""
    return sorted((p.parent for p in root.glob("*/.hydra")), key=lambda p: _job_number(p.name))


def _job_number(name: str) -> tuple[int, str]:
    head = name.split("-", 1)[0]
    return (int(head), name) if head.isdigit() else (1 << 30, name)
