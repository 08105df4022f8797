"""results.jsonl: every record, one JSON object per line, written as soon as it exists
(flushed and fsynced), so that a crash or a lost tracking server loses nothing; and the one
reader of such files, which every tool that takes them uses."""
from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import sys
from pathlib import Path

from harness.records.record import Record


class BadResults(ValueError):
    """A results file that cannot be read: the message names it (and the line) and what to do."""


def end_a_cut_line(path: Path) -> None:
    """A file a killed run left without a newline at its end: a whole record gets its
    newline, a cut one is dropped (with a warning); appending after it would make one
    line of two, which every reader refuses."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    if not data or data.endswith(b"\n"):
        return
    start = data.rfind(b"\n") + 1
    try:
        json.loads(data[start:])
        with open(path, "ab") as f:
            f.write(b"\n")
    except ValueError:
        with open(path, "r+b") as f:
            f.truncate(start)
        print(f"harness: warning: {path}: its last line was cut short (a run killed while writing it); "
              f"its {len(data) - start} bytes dropped before this run's lines", file=sys.stderr)


class NotWritten(Exception):
    """A record the results file could not take (its disk full, a quota, an I/O error): the
    message names the file and, for a lack of space, the disk."""


FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def mount_of(path: Path) -> Path:
    """The mount point of the filesystem that holds ``path``."""
    path = Path(path).absolute()
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path


def why_not_written(path: Path, e: OSError) -> str:
    what = e.strerror or str(e)
    if e.errno not in FULL:
        return f"{path} cannot be written ({what})"
    disk = mount_of(path)
    try:
        free = f", {shutil.disk_usage(disk).free >> 10} KiB free"
    except OSError:
        free = ""
    return f"{path} cannot be written: {what} on the disk mounted at {disk}{free}"


class JsonlSink:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        end_a_cut_line(self.path)
        self.written = 0    # records this sink wrote
        self.error = ""     # why the first record it could not write was not written

    def write(self, rec: Record) -> None:
        """The record as one line, on the disk (fsynced) when this returns; or, where the file
        cannot take it whole, NotWritten, and the file as it was: a part of a line left at
        its end would cut the next record's line too."""
        line = memoryview((json.dumps(rec.as_dict(), default=str) + "\n").encode())
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            start = os.fstat(fd).st_size
            try:
                while line:
                    line = line[os.write(fd, line):]
                os.fsync(fd)
            except OSError as e:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, start)
                self.error = self.error or why_not_written(self.path, e)
                raise NotWritten(why_not_written(self.path, e)) from None
        finally:
            os.close(fd)
        self.written += 1


def objects(path, cut_ok: bool = True) -> list[tuple[int, object]]:
    """(line number, JSON value) for each line of a results file. A last line without its
    newline that is not JSON is a write a crash cut: with ``cut_ok`` it is left out with a
    warning naming it, so that the records before it (fsynced one by one) still reach MLflow
    and the reports. Any other line that is not JSON, or a file that is missing or
    unreadable, is a BadResults naming it."""
    path = Path(path)
    if not path.exists():
        raise BadResults(f"{path}: no such file (give the results.jsonl a harness run wrote)")
    try:
        lines = path.read_text().split("\n")
    except (OSError, UnicodeDecodeError) as e:
        raise BadResults(f"{path}: cannot be read ({type(e).__name__}: {getattr(e, 'strerror', None) or e})") from None
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append((n, json.loads(line)))
        except ValueError as e:
            if cut_ok and n == len(lines):   # no newline after it: its write was cut
                print(f"warning: {path}, line {n}: cut short (a run that crashed while writing it); "
                      f"left out, the {len(out)} lines before it kept", file=sys.stderr)
                break
            raise BadResults(f"{path}, line {n}: not JSON ({e}); a results file holds one JSON object "
                             "per line") from None
    return out


def record_at(path, n: int, value) -> Record:
    """The Record of line ``n``, or a BadResults naming the line."""
    try:
        return Record.from_dict(value)
    except (TypeError, ValueError, AttributeError) as e:
        raise BadResults(f"{path}, line {n}: not a harness record ({e})") from None


def read(path) -> list[Record]:
    """The records of a results file (objects' rules); a line that is not a record is a
    BadResults naming it."""
    return [record_at(path, n, value) for n, value in objects(path)]
