"""Every key given on the command line names a key of conf/, or it is an error naming it.

Hydra alone answers a misspelt key (``shape=[[4,4]]``) with "Key 'shape' is not in struct"
and exit 1, and advises ``+shape=...``, which it then accepts and the harness never reads:
the run goes on without the setting the user meant. Here a key is known when it is a key
of conf/config.yaml, of an op's, sweep's or tracking config, or Hydra's own (``hydra...``).
"""
from __future__ import annotations

import difflib

from omegaconf import OmegaConf

from harness.errors import ConfigError

GROUP_DIRS = {"sweep": "sweep", "tracking": "tracking"}   # group -> where its configs' keys live


def known_tree(conf_dir) -> dict:
    """The keys a run's config can have: config.yaml's own, ``ops.<op>...`` from every op's
    config, ``sweep...`` and ``tracking...`` from every config of those groups."""
    tree = OmegaConf.to_container(OmegaConf.load(conf_dir / "config.yaml"))
    tree.pop("defaults", None)
    tree.pop("hydra", None)
    ops: dict = {}
    for path in sorted((conf_dir / "op").glob("*.yaml")):
        ops.update((OmegaConf.to_container(OmegaConf.load(path)) or {}).get("ops") or {})
    tree["ops"] = ops
    for group, folder in GROUP_DIRS.items():
        merged: dict = {}
        for path in sorted((conf_dir / folder).glob("*.yaml")):
            _merge(merged, OmegaConf.to_container(OmegaConf.load(path)) or {})
        tree[group] = merged
    return tree


def _merge(into: dict, other: dict) -> None:
    for k, v in other.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into.setdefault(k, v)


def check(argv: list[str], conf_dir) -> None:
    """A ConfigError for the first override whose key conf/ does not have."""
    tree = None
    sweep_named = any(a.partition("=")[0] == "sweep" and a.partition("=")[2] != "auto" for a in argv)
    for arg in argv:
        key, sep, _ = arg.partition("=")
        if not sep or arg.startswith("-"):
            continue
        key = key.lstrip("+~")
        if key in ("op", *GROUP_DIRS) or key.startswith("hydra") or "/" in key or "@" in key:
            continue   # a config group (checked by cli.check_groups), or Hydra's own
        tree = tree if tree is not None else known_tree(conf_dir)
        node, parts = tree, key.split(".")
        for depth, part in enumerate(parts):
            if not isinstance(node, dict) or part not in node:
                where = ".".join(parts[:depth])
                valid = sorted(node) if isinstance(node, dict) else []
                close = difflib.get_close_matches(part, valid, n=1)
                hint = f" (did you mean {'.'.join([*parts[:depth], close[0]])!r}?)" if close else ""
                has = (f"{where} has: {', '.join(valid)}" if where else
                       f"valid keys: {', '.join(k for k in valid if k != 'ops')}, ops.<op>.params.<name> "
                       "(harness --help says what each does)")
                raise ConfigError(f"unknown key {key!r}{hint}; {has}")
            node = node[part]
        if parts[0] == "sweep" and len(parts) > 1 and not sweep_named:
            raise ConfigError(f"{key} changes a named sweep: add sweep=smoke, sweep=default or sweep=full "
                              "(sweep=auto picks one for the device and would drop it)")
