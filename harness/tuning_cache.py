"""The tuner's choices, kept on disk between processes (HARNESS_CACHE, beside the roof
cache; the `cache` volume in the container).

Why: a tuner's measurements carry noise, so two processes can pick different configs
among near-equal candidates, and a row kernel's config decides its reduction tree and so
its bits. With the choice kept, a machine gives the same bits run after run, a nightly
series changes only when the code or the machine does, a worker restarted after a crash
continues with the same configs, and a second run skips the tuning.

An entry is valid for exactly what it was measured on: its key hashes the tuning key
(op, variant, row length, dtype), the kernel's source, the config space, the search and
its rules (harness/tuner.py), the GPU, and the software stack. ``tuning=fresh``
(HARNESS_TUNING) measures again and replaces the entries it reaches."""
import hashlib
import json
import os
import time
from pathlib import Path

from harness import settings

MODES = ("cached", "fresh")
FILE = "tuning.json"


def mode() -> str:
    return settings.choice("HARNESS_TUNING", MODES)


def _path() -> Path:
    from harness.roofline import cache_dir
    return cache_dir() / FILE


def entry_key(key, fingerprint: dict) -> str:
    """One string for a tuning key and everything its measurements depend on."""
    text = json.dumps({"key": [str(k) for k in key], **fingerprint}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _read() -> dict:
    try:
        return json.loads(_path().read_text())
    except (OSError, ValueError):
        return {}   # none yet, or unreadable: tune again


def holds_choices(machine: str) -> bool:
    """Whether a tuner may find a choice kept here for ``machine`` (``store``'s stamp): not
    with ``fresh`` (it measures again), nor in a cache holding only other GPUs' or other
    software stacks' choices (a volume shared by several machines): there, as in an empty
    cache, every key is tuned and built first."""
    return mode() != "fresh" and any(isinstance(v, dict) and v.get("machine") == machine for v in _read().values())


def load(entry: str) -> dict | None:
    """The stored choice for ``entry`` (None when there is none or ``fresh`` is asked for)."""
    if mode() == "fresh":
        return None
    return _read().get(entry)


def store(entry: str, value: dict, machine: str) -> dict:
    """Keep ``value`` (JSON) under ``entry``, stamped with when it was measured and on which
    ``machine`` (a GPU and software stack's digest, for ``holds_choices``); returns the
    stamped value. Written whole and renamed, so that a reader never sees half a
    file; an unwritable cache costs only a re-tuning next time."""
    value = {**value, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "machine": machine}
    path = _path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        entries = _read()
        entries[entry] = value
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(entries, indent=1))
        tmp.replace(path)
    except OSError:
        pass
    return value
