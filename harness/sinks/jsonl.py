"""results.jsonl: every record, one JSON object per line, written as soon as it exists
(flushed and fsynced), so that a crash or a lost tracking server loses nothing."""
from __future__ import annotations

import json
import os
from pathlib import Path

from harness.record import Record


class JsonlSink:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, rec: Record) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(rec.as_dict(), default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())


def read(path: Path) -> list[Record]:
    records = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                records.append(Record.from_dict(json.loads(line)))
            except (ValueError, TypeError) as e:
                raise ValueError(f"{path}:{n}: not a record ({e})") from None
    return records
