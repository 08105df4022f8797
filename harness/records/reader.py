"""The one reader of results files (JSONL, one harness record per line), for every command
that reads them: report, compare, upload, the summary and the results pages. A damaged line
(a field missing or of the wrong type, a last line a crash cut) is named in a warning by
its line and field, and the rest is read; lines of other tools (harness.measure.nvbench's rows,
devtools/first-run's timings) are returned apart."""
from __future__ import annotations

import hashlib
import json
import sys
import types
import typing
from pathlib import Path

from harness.records.record import Record
from harness.records.sinks import jsonl

# What places a record and says what it is: a line without one of them, or with one of the
# wrong type, cannot be shown as a case and is left out (with a warning naming it).
IDENTITY = ("op", "impl", "variant", "dtype", "shape", "status")
# What every record carries besides: a line without them is read, with a warning.
STAMPS = {"record_id": "read, its id made from the line", "timestamp": "read as the oldest of its case",
          "role": "read as neither ours nor peer", "series": "its series read from its impl_config"}
WARNED = 5   # damaged lines a file's warning names one by one; the rest are counted


class BadInput(ValueError):
    """A file the command cannot use; main prints it and exits 2."""


def is_record(row) -> bool:
    """A harness record, whole or damaged: a JSON object with a status or a record id, which
    no other tool's row has (harness.measure.nvbench's comparisons, devtools/first-run's timings)."""
    return isinstance(row, dict) and ("status" in row or "record_id" in row)


_TYPES = typing.get_type_hints(Record)


def _fits(value, hint) -> bool:
    """Whether a JSON value is of a Record field's type (a whole number serves as a number)."""
    if hint is typing.Any:
        return True
    if hint is type(None):
        return value is None
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType):
        return any(_fits(value, a) for a in args)
    origin = typing.get_origin(hint) or hint
    if origin is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if origin is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if not isinstance(value, origin):
        return False
    if origin is list and args:
        return all(_fits(v, args[0]) for v in value)
    if origin is dict and args:
        return all(isinstance(k, str) and _fits(v, args[1]) for k, v in value.items())
    return True


_NAMES = {str: "text", int: "a whole number", float: "a number", bool: "true or false", dict: "an object",
          type(None): "null"}


def _named(hint) -> str:
    if isinstance(hint, types.UnionType):
        return " or ".join(_named(a) for a in typing.get_args(hint))
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is list:
        return "a list of " + {int: "whole numbers", float: "numbers", str: "texts"}.get(args[0], "objects")
    return _NAMES.get(origin or hint, str(hint))


def damage(row: dict) -> tuple[list[str], list[str]]:
    """What is wrong with a record's line: (what leaves it out: an identity field missing,
    a field of the wrong type; what it is read without: a stamp missing)."""
    fatal = [f"no {k} (a record's identity)" for k in IDENTITY if k not in row]
    fatal += [f"{k} is {json.dumps(v)[:40]}, not {_named(_TYPES[k])}" for k, v in row.items()
              if k in _TYPES and not _fits(v, _TYPES[k])]
    return fatal, [f"no {k}: {then}" for k, then in STAMPS.items() if k not in row]


def record_of(row: dict) -> Record:
    """The Record of a line ``damage`` lets through. A missing record_id is made from the
    line's bytes, so that uploading the file again finds the same run (harness-upload is
    idempotent by it); a missing timestamp is "", the oldest of its case, never the newest."""
    rec = Record.from_dict(row)
    if "series" not in row:   # the framework's declaration, so the torch-importing registry: only here
        from harness.registry import series_of
        rec.series = series_of(rec.impl, rec.impl_config or {})
    if "record_id" not in row:
        rec.record_id = hashlib.sha256(json.dumps(row, sort_keys=True).encode()).hexdigest()[:32]
    if "timestamp" not in row:
        rec.timestamp = ""
    return rec


def read(path: Path, cut_ok: bool = True) -> tuple[list[Record], list]:
    """(the case records of a JSONL file, its other rows). A damaged record (``damage``) is
    named with its line and field on stderr, and left out or read as ``damage`` says; the
    file's other lines are read. ``cut_ok``: jsonl.objects' rule for a last line a crash cut;
    False for a file written whole (a page's own data, which is rewritten from what is read),
    where a cut line or a record left out is a BadResults, not a record to drop."""
    records, others, warnings = [], [], []
    for n, row in jsonl.objects(path, cut_ok):
        if not is_record(row):
            others.append(row)
            continue
        fatal, missing = damage(row)
        if fatal and not cut_ok:
            raise jsonl.BadResults(f"{path}, line {n}: a damaged record: {'; '.join(fatal)}; mend or remove "
                                   "the line")
        if fatal or missing:
            warnings.append(f"line {n}: " + ("; ".join(fatal) + ": left out" if fatal else "; ".join(missing)))
        if not fatal:
            records.append(record_of(row))
    for w in warnings[:WARNED]:
        print(f"warning: {path}, {w}", file=sys.stderr)
    if len(warnings) > WARNED:
        print(f"warning: {path}: {len(warnings) - WARNED} more lines like these (the lines above name the first "
              f"{WARNED})", file=sys.stderr)
    return records, others


def gpu_model(r: Record) -> str | None:
    """The GPU model a record ran on, as its provenance names it ("NVIDIA H200"): what a
    results page and the nightly history group by."""
    return (r.provenance or {}).get("gpu_name") or None


def gpu_card(r: Record) -> str | None:
    """The one GPU a record ran on (its uuid): cards of one model differ by a few % in small
    cases, so a comparison within one card is marked apart."""
    return (r.provenance or {}).get("gpu_uuid") or None


def on_cpu(r: Record) -> bool:
    """Measured on a CPU: a CPU device or a wall-clock timer. A record that names no device
    (a case stopped before it began) is not counted as a CPU's: it has no GPU either."""
    return (bool(r.device) and not r.device.startswith("cuda")) or r.timer in ("wall", "wall_interpreter")


FIRST_RUN = "first_run"


FIRST_RUN_FIELDS = ("op", "phase", "seconds", "gpu")


def read_first_runs(path: Path) -> list[dict]:
    """The devtools/first-run lines of a JSONL file that can be placed (first_runs)."""
    return first_runs(read(path)[1])


def first_runs(rows: list, left_out: list | None = None) -> list[dict]:
    """The devtools/first-run lines among a file's other rows that can be placed: each names
    its op, phase, seconds and GPU. The others (a run cut before its first record names no
    GPU) go to ``left_out`` when it is given."""
    placed_rows = []
    for row in rows:
        if isinstance(row, dict) and row.get("kind") == FIRST_RUN:
            placed = all(row.get(k) not in (None, "") for k in FIRST_RUN_FIELDS) and row["phase"] in ("cold", "warm")
            (placed_rows if placed else left_out if left_out is not None else []).append(row)
    return placed_rows


def latest_first_runs(rows: list[dict]) -> list[dict]:
    """The latest line per (GPU, op, phase), by its time; in (GPU, op, phase) order."""
    kept: dict[tuple, dict] = {}
    for row in rows:
        key = (row["gpu"], row["op"], row["phase"])
        if key not in kept or (row.get("when") or "") >= (kept[key].get("when") or ""):
            kept[key] = row
    return [kept[k] for k in sorted(kept)]
