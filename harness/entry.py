"""The commands' entry points (pyproject's [project.scripts]). Each imports its module inside a
guard: importing torch and Hydra takes the first 1-2 s of every command, and a Ctrl-C there
would otherwise be an import's traceback. Nothing heavy is imported here."""
from __future__ import annotations

import importlib
import sys

INTERRUPTED_EXIT = 130   # the shell's code for a process ended by SIGINT (128 + 2)


def start(command: str, module: str) -> None:
    """Import ``module`` and call its ``main``; a SIGINT during the import is one line and
    exit 130 (from ``main`` on, each command handles its own)."""
    try:
        main = importlib.import_module(module).main
    except KeyboardInterrupt:
        print(f"{command}: interrupted (SIGINT) while starting: nothing was run", file=sys.stderr)
        sys.exit(INTERRUPTED_EXIT)
    main()


def harness() -> None: start("harness", "harness.cli")
def upload() -> None: start("harness-upload", "harness.upload")
def nightly() -> None: start("harness-nightly", "harness.nightly")
def nvbench() -> None: start("harness-nvbench", "harness.nvbench")
def faults() -> None: start("harness-faults", "harness.faultsuite")
def compare() -> None: start("harness-compare", "harness.compare")
def report() -> None: start("harness-report", "harness.report")
def results() -> None: start("harness-results", "harness.results")
