"""Progress: a bar with an ETA over a run's cases, and what the running case is doing now.

Code that takes long inside a case (a compiler; harness-tune's search) calls
``phase("compiling ...")``; the run's reporter shows it: on a terminal in the bar's line
(rich), elsewhere (a log, CI) as a line of its own. In a worker process the phase travels
to the parent over the worker's pipe (harness.run.worker), so an isolated case says so too.
"""
from __future__ import annotations

import sys
from typing import Callable

from harness.records.sinks.console import progress_line

_sink: Callable[[str], None] | None = None


def phase(text: str) -> None:
    """Say what the running case is doing now (``torch.compile: compiling``)."""
    if _sink is not None:
        _sink(text)


def report_to(sink: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """Send phases to ``sink`` (None: nowhere); the sink it replaces."""
    global _sink
    previous, _sink = _sink, sink
    return previous


class RunProgress:
    """The run's cases as a bar (done / total, elapsed, ETA) and the case running now, on a
    terminal; plain lines elsewhere. ``line`` prints a line above the bar; ``write`` a finished
    case's record (a sink of the run's records, harness.records.sinks)."""

    def __init__(self, total: int, live: bool | None = None):
        self.total = total
        self.done = 0
        # Live on a terminal only: a log or a pipe gets plain lines, in order.
        self.live = (sys.stdout.isatty() and sys.stderr.isatty()) if live is None else live
        self._bar = None
        self._current = ""
        self._said: set[str] = set()

    def __enter__(self) -> "RunProgress":
        if self.live:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)
            self._bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"),
                                 TimeRemainingColumn(), console=Console(), transient=True)
            self._bar.start()
            self._task = self._bar.add_task("starting", total=self.total)
        self._previous = report_to(self.phase)
        return self

    def __exit__(self, *exc) -> None:
        report_to(self._previous)
        if self._bar is not None:
            self._bar.stop()

    def case(self, label: str) -> None:
        """The case that runs next."""
        self._current, self._said = label, set()
        if self._bar is not None:
            self._bar.update(self._task, description=label)

    def phase(self, text: str) -> None:
        """A phase of the running case; as a line of its own (no terminal), once a case: a
        case compiles again for its batch-invariance rows, and the second line said nothing new."""
        if self._bar is not None:
            self._bar.update(self._task, description=f"{self._current}: {text}")
        elif text not in self._said:
            self._said.add(text)
            print(f"  {self._current + ': ' if self._current else ''}{text}", flush=True)

    def write(self, rec) -> None:
        """A finished case's record: its line (``[done/total] ...``) and one step of the bar."""
        self.done += 1
        self.line(f"[{self.done}/{self.total}] {progress_line(rec)}")

    def line(self, text: str) -> None:
        """A finished case: its line, and one step of the bar."""
        if self._bar is not None:
            self._bar.console.print(text, highlight=False, markup=False, soft_wrap=True)
            self._bar.advance(self._task)
        else:
            print(text, flush=True)
