"""A peer's entry point imported at its first bind, not when the harness collects the impl
modules: the harness's own process imports every impl module to plan a run, and only the case
process calls a peer. Liger-Kernel's import pulls in peft and torch._dynamo: 13-15 s of its
first case on an H100 (devtools/first-run's phases), paid otherwise in both processes."""
import importlib

from harness.registry import Unavailable


def entry(module: str, name: str, install: str):
    """``module.name``. A package missing or broken (its import raising anything) or without
    the entry point (a release that moved it) makes the case a skipped one saying why."""
    try:
        found = importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - a broken install is as unusable as a missing one
        raise Unavailable(f"{module} cannot be imported ({type(e).__name__}: {e}); {install}") from e
    if not hasattr(found, name):
        raise Unavailable(f"{module} has no {name} (this release moved or renamed it); {install}")
    return getattr(found, name)
