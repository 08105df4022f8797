"""Where records go: the console table, the run's JSONL file, and MLflow."""
from __future__ import annotations

from harness.records.record import Record
from harness.records.sinks.jsonl import NotWritten


class Sinks:
    """A run's record to each of its sinks in turn (the results file first: a record is on
    the disk before anything else has it). A record the results file cannot take still
    goes to the others: its error (``JsonlSink.error``) stops the run's cases, not its records."""

    def __init__(self, *sinks):
        self.sinks = sinks

    def write(self, rec: Record) -> None:
        for sink in self.sinks:
            try:
                sink.write(rec)
            except NotWritten:
                pass
