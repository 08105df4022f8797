"""The commands' entry points (pyproject's [project.scripts]). Each imports its module inside a
guard: importing torch and Hydra takes the first 1-2 s of every command, and a Ctrl-C there
would otherwise be an import's traceback. Nothing heavy is imported here."""
from __future__ import annotations

import importlib
import sys

INTERRUPTED_EXIT = 130   # the shell's code for a process ended by SIGINT (128 + 2)


def start(command: str, module: str) -> int | None:
    """Import ``module`` and call its ``main``, returning what it returns: the console script
    exits with it (``sys.exit(harness_report())``), so a command's exit code (2 for a bad
    argument, harness-compare's 1 for a regression) reaches the shell. A SIGINT during the
    import is one line and exit 130 (from ``main`` on, each command handles its own)."""
    try:
        main = importlib.import_module(module).main
    except KeyboardInterrupt:
        print(f"{command}: interrupted (SIGINT) while starting: nothing was run", file=sys.stderr)
        sys.exit(INTERRUPTED_EXIT)
    return main()


def harness() -> int | None: return start("harness", "harness.cli")
def upload() -> int | None: return start("harness-upload", "harness.upload")
def nightly() -> int | None: return start("harness-nightly", "harness.nightly")
def nvbench() -> int | None: return start("harness-nvbench", "harness.nvbench")
def faults() -> int | None: return start("harness-faults", "harness.faultsuite")
def compare() -> int | None: return start("harness-compare", "harness.compare")
def report() -> int | None: return start("harness-report", "harness.report")
def results() -> int | None: return start("harness-results", "harness.results")
