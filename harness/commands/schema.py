"""The run's config, declared once: Hydra structured configs (dataclasses in the ConfigStore).

conf/config.yaml's defaults list puts ``harness_schema`` first, so every value composed on
top of it (the op, sweep and tracking configs, the command line) is checked against these
types in struct mode: an unknown key or a value of the wrong type never reaches a run. The
checks before Hydra (harness.commands.keys), ``harness --help`` and the errors' advice all read the
fields' metadata here: ``doc``, the key's meaning in one line, and ``advice``, what to give
when a value is refused.

Each framework declares its own settings (``Framework.settings_schema``), composed under
``frameworks.<name>.*``: this module names none of them.
"""
import dataclasses
import enum
import typing
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from omegaconf import MISSING

from harness.measure.timing import TimingBudget

SCHEMA = "harness_schema"   # its name in the ConfigStore, first in conf/config.yaml's defaults
# The config groups a user picks on the command line (conf/<group>/<name>.yaml), and what they pick.
GROUPS = {"op": "an op (conf/op/<op>.yaml), a list [rmsnorm,softmax], or all",
          "sweep": "auto (default on a GPU, smoke on a CPU) | smoke | default | full",
          "tracking": "local (embedded sqlite store) | server (MLFLOW_TRACKING_URI) | none"}


def key(default=MISSING, doc: str = "", advice: str = "", factory=None):
    """A config field with its one-line ``doc`` (``harness --help``) and the ``advice`` an
    error gives when a value is refused (default: the doc)."""
    meta = {"doc": doc, "advice": advice}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class Roof:
    cache: bool = key(True, "reuse a roof measured on this device within max_age_s", "give true or false")
    max_age_s: float = key(86400.0, "seconds a measured roof is reused (0: measure it each run)",
                           "give the seconds a measured roof is reused, a number >= 0 (default 86400; 0 measures "
                           "it again each run)")
    bytes: int = key(1 << 30, "buffer per roof kernel on a GPU (a quarter of it on a CPU)",
                     "give the bytes of each roof kernel's buffer, a whole number >= 1048576 (default 1073741824: "
                     "far beyond the caches)")


# The timing budget's fields, with its defaults (harness.measure.timing.TimingBudget, frozen there:
# a frozen dataclass is a read-only node, which a sweep's config could not fill).
Timing = dataclasses.make_dataclass("Timing", [(f.name, f.type, field(default=f.default))
                                               for f in dataclasses.fields(TimingBudget)])


@dataclass
class Sweep:
    """A named sweep (conf/sweep/<name>.yaml) fills these."""
    name: str = key(doc="the sweep's name: auto, smoke, default or full (sweep=NAME picks one)")
    seeds: int = key(doc="fresh random input sets checked per case", advice="give a whole number >= 1")
    determinism_runs: int = key(doc="launches on the same inputs whose bits are compared",
                                advice="give a whole number >= 1")
    batch_invariance: bool = key(doc="check that a row's bits do not depend on the batch", advice="give true or false")
    timing: Timing = key(doc="the timing budget: sweep.timing.<name> (harness/measure/timing.py TimingBudget)",
                               factory=Timing)


@dataclass
class Tracking:
    """A tracking config (conf/tracking/<name>.yaml) fills these."""
    enabled: bool = key(doc="log to MLflow (tracking=none: the JSONL only)", advice="give true or false")
    uri: Optional[str] = key(doc="the MLflow store or server, in place of the tracking config's (whose default is "
                             "$MLFLOW_TRACKING_URI where it is set)")
    experiment: str = key(doc="the MLflow experiment")
    parent_run_id: Optional[str] = key(None, "log this invocation under an existing run (the nightly job does)")
    group: Optional[str] = key(None, "tag every run with this group (the nightly job sets nightly)")


@dataclass
class Config:
    impl: Any = key("all", "an impl (framework), a list, or all (every one usable here)")
    variant: Any = key("all", "a variant (two_pass, atomic, online, ...), a list, or all")
    dtype: Any = key(doc="also fp32 / bf16 / fp16", factory=lambda: ["float32", "bfloat16", "float16"])
    device: str = key("auto", "auto | cpu | cuda | cuda:N")
    shapes: Any = key(None, "replaces the sweep's shapes, e.g. shapes=[[4096,4096]] or shapes=[[1000003]]",
                      "give a list of shapes, e.g. shapes=[[4096,4096]]")
    seed: Optional[int] = key(None, "base seed of the inputs; null draws a fresh one (recorded)",
                              "give a whole number (e.g. seed=1234), or seed=null for a fresh one")
    isolate: bool = key(True, "run cases in a worker process that is replaced after a crash or hang",
                        "give true or false")
    case_timeout_s: float = key(900.0, "a case that takes longer is killed and recorded as 'timeout' (isolate=true "
                                "only)", "give the seconds a case may take, a number > 0 (default 900)")
    processes: int = key(1, "N > 1: each case runs in N fresh worker processes, their medians merged (small shapes)",
                         "give a whole number >= 1 (1: each case in the run's one worker; 3: each case in three "
                         "fresh ones, their medians merged)")
    strict: bool = key(False, "exit 1 when any case fails, is invalid, errors or crashes", "give true or false")
    roof: Roof = key(factory=Roof)
    ops: Dict[str, Any] = key(doc="an op's parameters and shapes (conf/op/<op>.yaml), e.g. ops.rmsnorm.params.eps=1e-5",
                              factory=dict)
    sweep: Sweep = key(factory=Sweep)
    tracking: Tracking = key(factory=Tracking)
    frameworks: Any = key(factory=dict)   # each framework's settings_schema, by config_class()


def config_class(frameworks: dict) -> type:
    """Config with ``frameworks`` typed by each framework's ``settings_schema``."""
    declared = [(name, fw.settings_schema, field(default_factory=fw.settings_schema))
                for name, fw in sorted(frameworks.items()) if fw.settings_schema is not None]
    Frameworks = dataclasses.make_dataclass("Frameworks", declared)
    return dataclasses.make_dataclass(
        "HarnessConfig", [("frameworks", Frameworks, field(default_factory=Frameworks,
                                                           metadata=fields_of(Config)["frameworks"].metadata))],
        bases=(Config,))


_registered: list[type] = []


def register() -> type:
    """Store the schema (with the frameworks found now, plugins included) as ``harness_schema``;
    the class stored. Called before anything composes conf/ (harness.run.plan does, as it loads)."""
    from hydra.core.config_store import ConfigStore

    from harness import registry
    schema = config_class(registry.frameworks())
    ConfigStore.instance().store(name=SCHEMA, node=schema)
    _registered[:] = [schema]
    return schema


def current() -> type:
    """The schema registered last (registering it first where none is)."""
    return _registered[0] if _registered else register()


def fields_of(cls) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def type_of(cls, f: dataclasses.Field):
    """A field's type as a class where it is one (annotations may be strings)."""
    kind = typing.get_type_hints(cls).get(f.name, f.type)
    return kind if isinstance(kind, type) else None


def field_at(schema: type, dotted: str) -> tuple[dataclasses.Field, type | None] | None:
    """The schema's field for a dotted key (``roof.bytes``) and its type, or None where the
    schema does not type it (under ``ops``, a free dict)."""
    node, found = schema, None
    for part in dotted.split("."):
        if node is None or not dataclasses.is_dataclass(node) or part not in fields_of(node):
            return None
        found = fields_of(node)[part]
        node = type_of(node, found)
    return found, node


def walk(schema: type, prefix: str = ""):
    """(dotted key, field, its type or None) of every key of the schema, dataclasses opened, in declaration order."""
    for f in dataclasses.fields(schema):
        name, kind = f"{prefix}{f.name}", type_of(schema, f)
        yield name, f, kind
        if kind is not None and dataclasses.is_dataclass(kind):
            yield from walk(kind, name + ".")


def choices(kind) -> list[str] | None:
    """An Enum type's values, or None."""
    return [m.value for m in kind] if isinstance(kind, type) and issubclass(kind, enum.Enum) else None
