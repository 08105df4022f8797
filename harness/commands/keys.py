"""Every config group given on the command line names files of conf/<group>/, every key
names a key of the config's schema (harness.commands.schema) or of an op's config, and every value
has the key's type, or it is an error naming it.

Hydra alone answers a misspelt key (``shape=[[4,4]]``) with "Key 'shape' is not in struct"
and exit 1, and advises ``+shape=...``; a value of the wrong type is its traceback-like
report and exit 1. Here each is one line naming the key and what to give, exit 2.
"""
from __future__ import annotations

import difflib

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf
from omegaconf.errors import ValidationError

from harness.commands import schema
from harness.errors import ConfigError, unknown

GROUPS = tuple(schema.GROUPS)   # config groups a user picks on the command line


def known_tree(conf_dir, config: type) -> dict:
    """The keys a run's config can have: the schema's, and ``ops.<op>...`` from every op's
    config (an op's parameters are its own)."""
    tree = OmegaConf.to_container(OmegaConf.structured(config))
    ops: dict = {}
    for path in sorted((conf_dir / "op").glob("*.yaml")):
        ops.update((OmegaConf.to_container(OmegaConf.load(path)) or {}).get("ops") or {})
    tree["ops"] = ops
    return tree


def check_value(config: type, arg: str) -> None:
    """A ConfigError for a value the schema's type for its key refuses, naming the key, the
    value and the field's advice (an Enum's: its values). Sweeps (``-m``'s ``a,b``) and
    interpolations are left to Hydra, which checks each value as it composes a job."""
    override = OverridesParser.create().parse_override(arg)
    typed = schema.field_at(config, override.key_or_group)
    if typed is None or override.is_sweep_override() or override.is_delete():
        return
    (found, kind), value = typed, override.value()
    try:
        OmegaConf.update(OmegaConf.structured(config), override.key_or_group, value, merge=True)
    except ValidationError:
        if choices := schema.choices(kind):
            raise unknown(override.key_or_group, value, choices) from None
        advice = found.metadata.get("advice") or found.metadata.get("doc") or "see harness --help"
        raise ConfigError(f"{override.key_or_group}={value!r}: {advice}") from None


def _renamed(key: str, tree: dict) -> str | None:
    """The ``frameworks.<name>.<setting>`` a top-level ``<name>_<setting>`` became, if any."""
    for name, settings in (tree.get("frameworks") or {}).items():
        for setting in settings or {}:
            if key == f"{name}_{setting}":
                return f"frameworks.{name}.{setting}"
    return None


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
    config = schema.current()
    tree, chosen = None, (None if ops is None else every if "all" in ops else ops)
    sweep_named = any(a.partition("=")[0] == "sweep" and a.partition("=")[2] != "auto" for a in argv)
    for arg in argv:
        key, sep, _ = arg.partition("=")
        if not sep or arg.startswith("-"):
            continue
        key = key.lstrip("+~")
        if key in GROUPS or key.startswith("hydra") or "/" in key or "@" in key:
            continue   # a config group (group_choices), or Hydra's own
        tree = tree if tree is not None else known_tree(conf_dir, config)
        node, parts = tree, key.split(".")
        if renamed := _renamed(key, tree):
            raise ConfigError(f"{key} is now {renamed}: give {renamed}={arg.partition('=')[2]}")
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
        check_value(config, arg)
