"""The commands' entry points (pyproject's [project.scripts]). Each imports its module inside a
guard: importing torch and Hydra takes the first 1-2 s of every command, and a Ctrl-C there
would otherwise be an import's traceback. Nothing heavy is imported here."""
from __future__ import annotations

import importlib
import os
import sys

INTERRUPTED_EXIT = 130   # the shell's code for a process ended by SIGINT (128 + 2)
BROKEN_PIPE_EXIT = 141   # and by SIGPIPE (128 + 13), which Python turns into BrokenPipeError


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
    return run_main(main)


def run_main(main) -> int | None:
    """``main()``'s exit code; BROKEN_PIPE_EXIT, quietly, where the reader of the output left
    (`harness-compare A B | head`, `harness-results summary ... | head`): what it read was printed,
    and the rest has nowhere to go. Python's shutdown would flush stdout into the closed pipe
    again and print a second traceback: stdout goes to /dev/null first."""
    try:
        return main()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE_EXIT


def harness() -> int | None: return start("harness", "harness.commands.cli")
def upload() -> int | None: return start("harness-upload", "harness.records.upload")
def nightly() -> int | None: return start("harness-nightly", "harness.commands.nightly")
def nvbench() -> int | None: return start("harness-nvbench", "harness.measure.nvbench")
def faults() -> int | None: return start("harness-faults", "harness.measure.faultsuite")
def compare() -> int | None: return start("harness-compare", "harness.records.compare")
def report() -> int | None: return start("harness-report", "harness.records.report")
def results() -> int | None: return start("harness-results", "harness.records.results")
def tune() -> int | None: return start("harness-tune", "harness.commands.tune")
