"""The common interface: op specs, frameworks, implementations, and their discovery.

An *op* is a spec (``impls/<op>/__init__.py``): how to make inputs, the float64
reference, the compulsory bytes, tolerances and adversarial input sets.
An *impl* is one framework's version of an op (``impls/<op>/<framework>.py``),
registered with ``@impl(op, framework, variant=...)`` on a ``bind`` function:

    @impl("rmsnorm", "triton")
    def bind(x, weight, eps, out):
        ...                                   # one-time work: launch config, builds, views
        return lambda: _kernel[grid](...)     # the launcher: the only thing timed

``bind`` receives the op's inputs (already on the device) and a preallocated ``out``.
The launcher takes no arguments and runs on the current PyTorch stream. It either
writes ``out`` and returns None, or returns the output tensor it produced (what an
eager PyTorch user gets from ``F.rms_norm``); the checks read whichever it gives.

A *framework* (``impls/_frameworks/<name>.py``) says whether it is usable on a device.
Nothing here names an op or a framework: both are discovered from ``impls/``.
"""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, NamedTuple

import torch

NO_VARIANT = "-"

Launcher = Callable[[], "torch.Tensor | None"]


class Tol(NamedTuple):
    """Pass when |out - ref| <= rtol * |ref| + atol * scale (scale: Op.error_scale)."""

    rtol: float
    atol: float
    why: str


class Op:
    """Base class of an op spec. Subclasses set the class attributes and the methods."""

    name: ClassVar[str]
    ndim: ClassVar[int]                       # rank of the shapes this op takes
    variants: ClassVar[tuple[str, ...]] = ()  # algorithm variants impls may implement
    negative_controls: ClassVar[tuple[str, ...]] = ()  # variants expected to fail
    row_op: ClassVar[bool] = False            # rows independent: batch invariance applies
    row_args: ClassVar[tuple[str, ...]] = ("x",)  # inputs whose first dim is the row
    tolerances: ClassVar[dict[torch.dtype, Tol]]
    adversarial: ClassVar[dict[str, str]] = {}  # case name -> what it breaks
    semantics: ClassVar[str] = ""

    _registry: ClassVar[dict[str, type["Op"]]] = {}

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "name" in cls.__dict__:
            Op._registry[cls.name] = cls

    def __init__(self, **params: Any):
        self.params = params

    # --- what each op provides -------------------------------------------------
    def make_case(self, case: str, shape: tuple[int, ...], dtype: torch.dtype,
                  gen: torch.Generator, device: torch.device) -> dict[str, Any]:
        """The named inputs of ``bind`` (without ``out``) for the case 'random' or an
        adversarial set. An adversarial set may choose its own shape."""
        raise NotImplementedError

    def make_output(self, inputs: dict[str, Any]) -> torch.Tensor:
        raise NotImplementedError

    def reference(self, **inputs: Any) -> torch.Tensor:
        """float64 result from the same (low-precision) inputs."""
        raise NotImplementedError

    def bytes_moved(self, shape: tuple[int, ...], dtype: torch.dtype) -> tuple[int, int]:
        """Compulsory (read, written) bytes: every operand read once, every output written once."""
        raise NotImplementedError

    def error_scale(self, inputs: dict[str, Any], ref: torch.Tensor) -> "torch.Tensor | float":
        """What ``atol`` is relative to; 1 unless an op knows better (a sum: sum |x|)."""
        return 1.0

    # --- shared by all ops -----------------------------------------------------
    def inputs(self, shape, dtype, device, seed: int, case: str = "random") -> dict[str, Any]:
        if case != "random" and case not in self.adversarial:
            raise KeyError(f"op {self.name} has no input set {case!r}; "
                           f"it has: random, {', '.join(self.adversarial)}")
        gen = torch.Generator(device=device).manual_seed(seed)
        return self.make_case(case, tuple(shape), dtype, gen, torch.device(device))

    def validate_shape(self, shape) -> tuple[int, ...]:
        shape = tuple(shape)
        if len(shape) != self.ndim:
            want = "[N]" if self.ndim == 1 else "[rows, cols]"
            raise ValueError(f"op {self.name} takes {self.ndim}-D shapes {want}, got {list(shape)}")
        for n in shape:
            if not isinstance(n, int) or isinstance(n, bool):
                raise ValueError(f"shape {list(shape)} of op {self.name}: sizes must be integers")
            if n <= 0:
                raise ValueError(f"shape {list(shape)} of op {self.name} is empty or negative; "
                                 f"every size must be at least 1")
        return shape

    def rows(self, inputs: dict[str, Any], out: torch.Tensor, n: int):
        """The first ``n`` rows of a row op's inputs and output, for batch invariance."""
        sliced = {k: (v[:n] if k in self.row_args else v) for k, v in inputs.items()}
        return sliced, out[:n]

    def tolerance(self, dtype: torch.dtype) -> Tol:
        return self.tolerances[dtype]


OURS, PEER = "ours", "peer"


class Unavailable(RuntimeError):
    """Raised by a bind when its framework turns out not to run here after the plan was made
    (a build started early by Framework.warm failed): the case is recorded as skipped with
    this message, as a framework whose ``unusable`` gives a reason is, never as an error."""


class TooLarge(ValueError):
    """Raised by a bind whose framework cannot take inputs this large here (a simulator's or
    interpreter's limit, not the kernel's): the runner leaves that input set out and says so
    in the record, and runs the case's other sets; a case none of whose sets fit is skipped."""


class Framework:
    """What a framework needs to run on a device. Subclasses live in impls/_frameworks/.

    ``role``: ``ours`` for the product's own implementations (the kernels this harness exists
    to compare across frameworks), ``peer`` for what they are measured against (eager
    PyTorch, torch.compile, Liger, ...). Summaries, the console's comparison and the GPU
    tests read it, so that a new framework takes its place in them by declaring it."""

    name: ClassVar[str]
    role: ClassVar[str] = PEER
    # This framework's settings, ``frameworks.<name>.*`` of the run's config: a dataclass whose
    # fields carry harness.commands.schema.key metadata (the doc --help shows). The run checks them
    # against it and hands them to every process that runs cases (``configure``).
    settings_schema: ClassVar[type | None] = None
    # Its settings whose other values make a series of their own (a record's ``series``): a
    # kernel compiled another way is another impl, never a point of the default's history.
    series_settings: ClassVar[tuple[str, ...]] = ()
    # The distributions whose versions a record's provenance names (the first installed of
    # alternatives is the one found).
    packages: ClassVar[tuple[str, ...]] = ()
    _registry: ClassVar[dict[str, "Framework"]] = {}

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.role not in (OURS, PEER):
            raise ValueError(f"framework {cls.__name__}: role {cls.role!r}; it must be {OURS!r} or {PEER!r}")
        declared = {f.name for f in dataclasses.fields(cls.settings_schema)} if cls.settings_schema else set()
        if unknown := [k for k in cls.series_settings if k not in declared]:
            raise ValueError(f"framework {cls.__name__}: series_settings {unknown} are not fields of its "
                             f"settings_schema ({', '.join(sorted(declared)) or 'none'}); declare them there")
        if "name" in cls.__dict__:
            Framework._registry[cls.name] = cls()
            Framework._registry[cls.name].configure({})   # its defaults, until a run configures it

    def configure(self, values: dict) -> None:
        """Take the run's ``frameworks.<name>.*`` (plain values; defaults where absent),
        checked against ``settings_schema``, as ``self.config``: before any case, in each
        process that runs cases."""
        if self.settings_schema is not None:
            from omegaconf import OmegaConf
            self.config = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(self.settings_schema), values))

    def series(self, values: dict) -> str:
        """The series of this framework's records under ``values`` (the run's
        ``frameworks.<name>``, or a record's impl_config: plain values, other keys ignored):
        its name, then ``[value]`` for each series setting not at its default (``name[static]``)."""
        if not self.series_settings:
            return self.name
        from omegaconf import OmegaConf
        schema = OmegaConf.structured(self.settings_schema)
        default = OmegaConf.to_container(schema, enum_to_str=True)
        given = OmegaConf.to_container(
            OmegaConf.merge(schema, {k: v for k, v in values.items() if k in self.series_settings}), enum_to_str=True)
        return self.name + "".join(f"[{given[k]}]" for k in self.series_settings if given[k] != default[k])

    def prepare(self, device: torch.device) -> None:
        """Environment set before the impl modules are imported (e.g. an interpreter flag)."""

    def unusable(self, device: torch.device) -> str | None:
        """Why this framework cannot run on ``device`` here, or None if it can."""
        return None

    def warm(self, device: torch.device, cases: list) -> bool:
        """Start the one-time work (a build, compiles) that ``cases`` (the run's runnable
        cases of this framework, harness.run.runner.CaseSpec) will need, in the background, and
        return at once: True when something was started, so that the plan runs these cases
        after the others of their shape. Called once per run, after the plan and before any
        case. The work must use the CPU only, never the GPU, while cases are timed beside it.
        A failure is not raised here: the bind that needs the work raises Unavailable, with
        the reason. Default: nothing to warm (the work happens at bind)."""
        return False

    def ready(self) -> bool:
        """Whether the work ``warm`` started is over (done or failed): until then the run
        holds this framework's cases back while others can run (harness.run.session)."""
        return True

    def interpreted(self, device: torch.device) -> bool:
        """True when kernels run in an interpreter: correct, but no timing claims."""
        return False

    def settings(self) -> dict:
        """How this framework is set up for every launch (recorded in each record's
        ``impl_config``, under the impl's own launch config)."""
        return {}

    def roof_kernels(self, src: torch.Tensor, dst: torch.Tensor) -> dict[str, dict[str, Launcher]]:
        """Kernels the roof times beside torch's own on a GPU (harness.measure.roofline), by kind:
        ``{"read": {name: launcher}, "mix": {...}, "copy": {...}}``; a read reads all of ``src``
        (fp32, contiguous), a mix reads its first three quarters and writes the last quarter
        of ``dst``, a copy copies ``src`` into ``dst``. The fastest of each kind sets the roof
        and the roof names it, so a framework whose plain streaming kernels may beat torch's
        offers them here: a roof that ops exceed is no roof. None by default; an ImportError
        says the framework is missing, and the roof records why."""
        return {}


@dataclass(frozen=True)
class Impl:
    op: str
    impl: str
    variant: str
    bind: Callable[..., Launcher] = field(compare=False)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.op, self.impl, self.variant)


_impls: dict[tuple[str, str, str], Impl] = {}


def impl(op: str, name: str, variant: str = NO_VARIANT):
    """Register ``bind`` as framework ``name``'s implementation of ``op`` (and ``variant``)."""

    def register(bind: Callable[..., Launcher]) -> Callable[..., Launcher]:
        module = bind.__module__
        if module.startswith(IMPLS_PACKAGE + ".") and module.split(".")[-1] != name:
            raise ValueError(f"impl {name!r} of op {op!r} is registered in {module}; "
                             f"it must live in impls/{op}/{name}.py")
        key = (op, name, variant)
        if key in _impls:
            raise ValueError(f"impl {key} is registered twice")
        _impls[key] = Impl(op, name, variant, bind)
        return bind

    return register


# --- discovery -------------------------------------------------------------------

IMPLS_PACKAGE = "impls"
# Modules outside impls/ that register more frameworks and impls (comma-separated names),
# e.g. a team's private kernels, or the tests' deliberately broken impls.
PLUGINS_ENV = "HARNESS_PLUGINS"


def load_plugins() -> None:
    import os
    from harness.errors import ConfigError
    for name in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        try:
            importlib.import_module(name)
        except ImportError as e:
            if e.name and e.name != name and not name.startswith(e.name + "."):   # the plugin's own import failed
                raise ConfigError(f"{PLUGINS_ENV} names {name!r}, which imports {e.name!r}, which cannot be "
                                  f"imported ({type(e).__name__}: {e}); install {e.name!r}, or leave {name!r} "
                                  f"out of {PLUGINS_ENV}") from None
            raise ConfigError(f"{PLUGINS_ENV} names {name!r}, which cannot be imported ({type(e).__name__}: {e}); "
                              f"put its package on PYTHONPATH (or install it), or leave it out of {PLUGINS_ENV}"
                              ) from None


def _submodules(package) -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__)
                  if not m.name.startswith("_"))


def ops() -> dict[str, type[Op]]:
    """Every op spec under impls/, imported (specs import nothing but torch)."""
    root = importlib.import_module(IMPLS_PACKAGE)
    for name in _submodules(root):
        importlib.import_module(f"{IMPLS_PACKAGE}.{name}")
    load_plugins()
    return dict(sorted(Op._registry.items()))


def frameworks() -> dict[str, Framework]:
    pkg = importlib.import_module(f"{IMPLS_PACKAGE}._frameworks")
    for name in _submodules(pkg):
        importlib.import_module(f"{pkg.__name__}.{name}")
    load_plugins()
    return dict(sorted(Framework._registry.items()))


def configure(settings: dict[str, dict]) -> None:
    """Hand each framework its settings (``{name: {key: value}}``, the run's ``frameworks``)."""
    for name, fw in frameworks().items():
        fw.configure(settings.get(name) or {})


def framework(name: str) -> Framework:
    return Framework._registry.get(name) or frameworks()[name]


def role_of(framework: str) -> str:
    """A framework's role (``ours`` or ``peer``); ``peer`` for one not known here."""
    found = Framework._registry.get(framework) or frameworks().get(framework)
    return found.role if found is not None else PEER


def series_of(framework: str, values: dict) -> str:
    """A framework's series (Framework.series) under ``values``: the run's settings of it, or
    the impl_config of a record that does not name its series; its name for one not known here."""
    found = Framework._registry.get(framework) or frameworks().get(framework)
    return found.series(values) if found is not None else framework


def impl_modules(op: str) -> list[str]:
    """The impl names of an op: its module files (found without importing them), and the
    impls that plugins registered for it."""
    pkg = importlib.import_module(f"{IMPLS_PACKAGE}.{op}")
    load_plugins()
    plugged = {k[1] for k in _impls if k[0] == op}
    return sorted(set(_submodules(pkg)) | plugged)


class ImportFailure(NamedTuple):
    op: str
    impl: str
    reason: str


def load_impls(op: str, names: list[str]) -> tuple[list[Impl], list[ImportFailure]]:
    """Import the named impl modules of ``op``; a module that fails to import (its framework
    is missing or broken) becomes an ImportFailure with the reason, never an exception."""
    failures = []
    for name in names:
        if any(k[0] == op and k[1] == name for k in _impls):
            continue   # already imported (or registered by a plugin)
        try:
            importlib.import_module(f"{IMPLS_PACKAGE}.{op}.{name}")
        except Exception as e:  # noqa: BLE001 - any import error means "not usable here"
            failures.append(ImportFailure(op, name, f"import failed: {type(e).__name__}: {e}"))
    loaded = [i for k, i in sorted(_impls.items()) if k[0] == op and k[1] in names]
    return loaded, failures


def registered() -> dict[tuple[str, str, str], Impl]:
    return dict(_impls)
