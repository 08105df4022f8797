"""Launch configs are data: a table per GPU model, read by every run, and a framework's stated
rule where the table has no entry. A run never measures a config; ``harness-tune``
(harness.commands.tune) measures and writes the tables.

A table is ``conf/launch/<gpu>.yaml`` (``<gpu>``: the GPU's name as CUDA reports it, lower
case, without "nvidia", other characters as '-': ``h100-80gb-hbm3``, ``h200``). It maps each
kernel (its framework, op and variant) to one line per entry:

    triton rmsnorm tuned:
      4096 bfloat16: {rows: 1, num_warps: 8, ..., us: 176.4}
      4096 bfloat16 rows 1-181: {rows: 1, num_warps: 4, ...}

The entry without ``rows`` is the config of that row length (a 1-D kernel: its length) and
dtype: it decides every row's bits. An entry with ``rows lo-hi`` serves batches of lo to hi
rows, and only a config that harness-tune saw write the same bits as the plain entry's on its
tuning problems may stand there: a row's bits never depend on the batch (batch invariance).
``us`` says what harness-tune measured; a run never reads it.
"""
from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

TABLES = Path(__file__).resolve().parents[2] / "conf" / "launch"
# What harness-tune notes beside a config: measurements and the tuner's bookkeeping, never
# launched (harness.launch.tuner adds these to a candidate when it measures it).
MEASURED = ("us", "mid_us", "small_us", "bits", "regs", "programs", "tuned_for_rows")
_BATCH = re.compile(r"^(\d+) (\w+)(?: rows (\d+)-(\d+))?$")


@dataclass(frozen=True)
class Choice:
    """A launch config and where it came from: ``table <file>@<blob> (<entry>)`` or ``rule``."""
    config: dict
    source: str


def launchable(config: dict) -> dict:
    """A table entry without what harness-tune noted beside it: the config to launch."""
    return {k: v for k, v in config.items() if k not in MEASURED}


def gpu_slug(name: str) -> str:
    words = re.sub(r"[^a-z0-9]+", "-", name.lower().replace("nvidia", "")).strip("-")
    return words or "unknown"


def table_path(gpu_name: str) -> Path:
    return TABLES / f"{gpu_slug(gpu_name)}.yaml"


def blob_id(data: bytes) -> str:
    """git's object id of a file holding ``data`` (``git log --find-object`` finds its commits)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Table:
    """One GPU's table as read: ``entries[kernel][(cols, dtype)]`` holds the plain config and
    its batch ranges ([(lo, hi, config)], lo <= hi)."""
    path: Path
    gpu: str
    blob: str
    entries: dict

    def name(self) -> str:
        try:
            return str(self.path.relative_to(TABLES.parent.parent))
        except ValueError:
            return str(self.path)

    def lookup(self, kernel: str, cols: int, dtype: str, batch: int | None) -> tuple[dict, str] | None:
        found = self.entries.get(kernel, {}).get((cols, dtype))
        if found is None:
            return None
        plain, ranges = found
        for lo, hi, config in ranges:
            if batch is not None and lo <= batch <= hi:
                return config, f"{cols} {dtype} rows {lo}-{hi}"
        return plain, f"{cols} {dtype}"


class TableError(ValueError):
    """A table that cannot be read: the file and what is wrong."""


def parse(text: str, path: Path) -> Table:
    import yaml
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise TableError(f"{path}: not YAML ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("kernels", {}), dict):
        raise TableError(f"{path}: expected 'gpu:' and 'kernels:' mapping each kernel to its entries")
    entries: dict = {}
    for kernel, lines in (data.get("kernels") or {}).items():
        if not isinstance(lines, dict):
            raise TableError(f"{path}: kernel {kernel!r}: expected entries '<cols> <dtype>[ rows lo-hi]: {{config}}'")
        for key, config in lines.items():
            m = _BATCH.match(str(key))
            if not m or not isinstance(config, dict) or (m.group(3) and int(m.group(3)) > int(m.group(4))):
                raise TableError(f"{path}: kernel {kernel!r}, entry {key!r}: expected '<cols> <dtype>' or "
                                 f"'<cols> <dtype> rows <lo>-<hi>' (lo <= hi) mapped to a config")
            plain, ranges = entries.setdefault(str(kernel), {}).setdefault((int(m.group(1)), m.group(2)), [None, []])
            if m.group(3):
                ranges.append((int(m.group(3)), int(m.group(4)), launchable(config)))
            else:
                entries[str(kernel)][(int(m.group(1)), m.group(2))][0] = launchable(config)
    for kernel, lines in entries.items():   # a range without its row length's config: other batches, other bits
        for (cols, dtype), (plain, ranges) in lines.items():
            if plain is None:
                raise TableError(f"{path}: kernel {kernel!r}: batch ranges of '{cols} {dtype}' without the entry "
                                 f"'{cols} {dtype}' itself, whose bits they share; harness-tune writes both")
    return Table(path, str(data.get("gpu", "")), blob_id(text.encode()), entries)


_tables: dict[str, Table | None] = {}


def table_for(gpu_name: str) -> Table | None:
    """The table of this GPU model, read once per process; None where there is none."""
    if gpu_name not in _tables:
        path = table_path(gpu_name)
        _tables[gpu_name] = parse(path.read_text(), path) if path.exists() else None
    return _tables[gpu_name]


def gpu_name(device) -> str:
    import torch
    return torch.cuda.get_device_name(device) if getattr(device, "type", "cpu") == "cuda" else "cpu"


# harness-tune's session (harness.commands.tune): set while it binds, so that each config_for measures.
_session = None


def config_for(kernel: str, cols: int, dtype, batch: int | None, device, rule: dict,
               check: Callable[[dict], None] | None = None, space: Callable | None = None) -> Choice:
    """The launch config of ``kernel`` (its framework, op and variant: the table's name) for
    rows of ``cols`` (a 1-D kernel: its length), ``dtype`` and a batch of ``batch`` rows (None:
    a 1-D kernel) on ``device``: this GPU's table's entry, else ``rule`` (the framework's
    stated rule for what no table holds). ``check(config)`` raises ValueError for a config the
    kernel cannot take: a table entry it refuses (a table older than the kernel) gives way to
    the rule, and the source says why. ``space()`` (harness-tune only) gives what the search
    needs."""
    dtype = str(dtype).replace("torch.", "")
    if _session is not None and space is not None:
        return _session.choose(kernel, cols, dtype, batch, device, rule, space)
    table = table_for(gpu_name(device))
    found = table.lookup(kernel, cols, dtype, batch) if table else None
    if found is None:
        return Choice(dict(rule), "rule")
    config, entry = found
    if check is not None:
        try:
            check(config)
        except ValueError as e:
            print(f"harness: {table.name()}: {kernel} {entry}: {e}; the rule's config runs instead "
                  "(harness-tune measures this kernel again)", file=sys.stderr)
            return Choice(dict(rule), f"rule (the table's {entry} does not fit this kernel: {e})")
    return Choice(dict(config), f"table {table.name()}@{table.blob[:12]} ({entry})")
