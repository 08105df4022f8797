"""A peer's entry point imported at its first bind, not when the harness collects the impl
modules: the harness's own process imports every impl module to plan a run, and only the case
process calls a peer. Liger-Kernel's import alone takes 11 s on the H200 host (it pulls in
peft and torch._dynamo), which a run paid twice, once in each process."""
import importlib

from harness.registry import Unavailable


def entry(module: str, name: str, install: str):
    """``module.name``; a failed import makes the case a skipped one saying why and what to install."""
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as e:
        raise Unavailable(f"{module} cannot be imported ({e}); {install}") from e
