"""Every config group given on the command line names files of conf/<group>/, and every key
names a key of conf/, or it is an error naming it.

Hydra alone answers a misspelt key (``shape=[[4,4]]``) with "Key 'shape' is not in struct"
and exit 1, and advises ``+shape=...``, which it then accepts and the harness never reads:
the run goes on without the setting the user meant. Here a key is known when it is a key
of conf/config.yaml, of an op's, sweep's or tracking config, or Hydra's own (``hydra...``).
"""
from __future__ import annotations

import difflib

from omegaconf import OmegaConf

from harness.errors import ConfigError, unknown

GROUPS = ("op", "sweep", "tracking")   # config groups a user picks on the command line


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
    for group in GROUPS[1:]:   # op's configs fill ``ops`` (above)
        merged: dict = {}
        for path in sorted((conf_dir / group).glob("*.yaml")):
            _merge(merged, OmegaConf.to_container(OmegaConf.load(path)) or {})
        tree[group] = merged
    return tree


def _merge(into: dict, other: dict) -> None:
    for k, v in other.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into.setdefault(k, v)


def group_choices(argv: list[str], conf_dir) -> dict[str, set[str] | None]:
    """{group: the names given to it} for each config group on the command line (one, a
    list, or a multirun's comma list; None for a Hydra sweep function such as choice(...),
    which Hydra resolves). Each name must have a file in conf/<group>/, and an op must be
    given: Hydra alone says 'Could not load op/NAME' with a traceback, or 'You must specify
    op', and exits 1."""
    given: dict[str, set[str] | None] = {}
    for arg in argv:
        key, sep, value = arg.partition("=")
        key = key.lstrip("+~")
        if not sep or key not in GROUPS:
            continue
        if "(" in value:
            given[key] = None
            continue
        valid = sorted(p.stem for p in (conf_dir / key).glob("*.yaml"))
        for name in (v.strip() for v in value.strip("[]").split(",")):
            if name not in valid:
                raise unknown(key, name, valid)
            names = given.setdefault(key, set())
            if names is not None:
                names.add(name)
    if "op" not in given:
        valid = sorted(p.stem for p in (conf_dir / "op").glob("*.yaml"))
        raise ConfigError(f"no op given; add op=<name> (harness --help); valid: {', '.join(valid)}")
    return given


# Hydra's flags that take the next argument as their value (--info's is optional: one of its choices).
VALUE_FLAGS = ("--cfg", "-c", "--package", "-p", "--config-path", "-cp", "--config-name", "-cn",
               "--config-dir", "-cd", "--experimental-rerun")
INFO_FLAGS, INFO_CHOICES = ("--info", "-i"), ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")
OPENS, CLOSES = "[{(", "]})"


def unclosed(value: str) -> bool:
    """Whether a value opens more brackets than it closes (quoted text aside)."""
    depth, quote = 0, ""
    for ch in value:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        else:
            depth += (ch in OPENS) - (ch in CLOSES)
    return depth > 0


def check_words(argv: list[str], conf_dir) -> None:
    """A ConfigError for an argument that is neither key=value nor a flag, and for a value
    whose brackets do not close: Hydra answers both with its grammar's error (exit 1), naming
    neither the key nor the quoting, and ``harness rmsnorm`` with "You must specify 'op'"."""
    for i, arg in enumerate(argv):
        before = argv[i - 1] if i else ""
        if arg.startswith("-") or before in VALUE_FLAGS or (before in INFO_FLAGS and arg in INFO_CHOICES):
            continue
        _, eq, value = arg.partition("=")
        if eq and unclosed(value):
            rest = argv[i + 1:]
            ends = next((j for j in range(len(rest)) if not unclosed(" ".join([value, *rest[:j + 1]]))), None)
            if ends is None:
                raise ConfigError(f"{arg}: its brackets do not close; close them (e.g. shapes=[[4096,4096]])")
            whole = " ".join([arg, *rest[:ends + 1]])
            raise ConfigError(f"{whole} reached the harness as {ends + 2} arguments (the shell split it at its "
                              f"spaces): quote it ('{whole}') or leave out the spaces ({whole.replace(' ', '')})")
        if eq or arg.startswith("~"):   # ~key: Hydra's deletion of a key, which takes no value
            continue
        groups = {g: sorted(p.stem for p in (conf_dir / g).glob("*.yaml")) for g in GROUPS}
        named = [g for g, choices in groups.items() if arg in choices]
        if named:
            raise ConfigError(f"{arg}: arguments are key=value; did you mean {named[0]}={arg}? (harness --help)")
        raise ConfigError(f"{arg}: not a key=value argument (e.g. op=rmsnorm); a value with spaces must be quoted "
                          "as one argument ('shapes=[[4, 64]]'); harness --help lists the keys")


def check(argv: list[str], conf_dir) -> None:
    """A ConfigError for an argument that is no override (check_words), for the first group
    choice conf/ does not have (group_choices), or the first override whose key conf/ does
    not have, or that sets an op that op= does not select: Hydra would refuse it and advise
    ``+ops...``, which then adds that op to the run."""
    check_words(argv, conf_dir)
    ops = group_choices(argv, conf_dir)["op"]
    every = {p.stem for p in (conf_dir / "op").glob("*.yaml")} - {"all"}
    tree, chosen = None, (None if ops is None else every if "all" in ops else ops)
    sweep_named = any(a.partition("=")[0] == "sweep" and a.partition("=")[2] != "auto" for a in argv)
    for arg in argv:
        key, sep, _ = arg.partition("=")
        if not sep or arg.startswith("-"):
            continue
        key = key.lstrip("+~")
        if key in GROUPS or key.startswith("hydra") or "/" in key or "@" in key:
            continue   # a config group (group_choices), or Hydra's own
        tree = tree if tree is not None else known_tree(conf_dir)
        node, parts = tree, key.split(".")
        if parts[0] == "ops" and len(parts) > 1 and parts[1] in tree["ops"] and chosen is not None \
                and parts[1] not in chosen:
            raise ConfigError(f"{key}: op {parts[1]} is not among the ops given ({', '.join(sorted(chosen))}); "
                              f"add it to op= (op=[{','.join(sorted(chosen | {parts[1]}))}]) or drop the key")
        for depth, part in enumerate(parts):
            if not isinstance(node, dict):
                where = ".".join(parts[:depth])
                raise ConfigError(f"unknown key {key!r}: {where} is a value, not a group of keys; give {where}=...")
            if part not in node:
                where = ".".join(parts[:depth])
                valid = sorted(node) if isinstance(node, dict) else []
                close = difflib.get_close_matches(part, valid, n=1)
                hint = f" (did you mean {'.'.join([*parts[:depth], close[0]])!r}?)" if close else ""
                has = (f"{where} takes no keys" if where and not valid else
                       f"{where} has: {', '.join(valid)}" if where else
                       f"valid keys: {', '.join(k for k in valid if k != 'ops')}, ops.<op>.params.<name> "
                       "(harness --help says what each does)")
                raise ConfigError(f"unknown key {key!r}{hint}; {has}")
            node = node[part]
        if parts[0] == "sweep" and len(parts) > 1 and not sweep_named:
            raise ConfigError(f"{key} changes a named sweep: add sweep=smoke, sweep=default or sweep=full "
                              "(sweep=auto picks one for the device and would drop it)")
