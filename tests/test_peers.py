"""Optional peers say why they cannot run, and their impls are found where installed."""
import sys

import pytest
import torch

from harness import registry


def test_quack_says_why_it_cannot_run_on_a_cpu():
    reason = registry.frameworks()["quack"].unusable(torch.device("cpu"))
    assert reason and "NVIDIA GPUs only" in reason


def test_quack_names_the_package_to_install_when_it_is_missing(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setitem(sys.modules, "quack", None)   # import quack raises ImportError
    reason = registry.frameworks()["quack"].unusable(torch.device("cuda"))
    assert reason and "pip install quack-kernels" in reason


def test_quack_needs_compute_capability_9(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    reason = registry.frameworks()["quack"].unusable(torch.device("cuda"))
    assert reason and "9.0 or newer" in reason and "8.0" in reason


def test_quack_offers_rmsnorm_and_softmax():
    assert "quack" in registry.impl_modules("rmsnorm")
    assert "quack" in registry.impl_modules("softmax")


def test_liger_is_imported_at_its_first_bind_not_when_its_impls_are_collected(monkeypatch):
    """The harness's process imports every impl module to plan; only a case process calls a
    peer, and Liger's import takes seconds: its impl modules import without it, and a bind
    where it cannot be imported skips the case saying what to install."""
    import importlib
    import types

    from harness.registry import Unavailable
    from impls._frameworks import _peer
    real_import = importlib.import_module
    modules = {op: real_import(f"impls.{op}.liger") for op in ("rmsnorm", "layernorm", "softmax")}

    def broken(name, *a):
        if name.startswith("liger_kernel"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *a)
    monkeypatch.setattr(_peer.importlib, "import_module", broken)
    for module in modules.values():
        with pytest.raises(Unavailable, match="cannot be imported.*pip install liger-kernel"):
            module.bind(*[None] * (module.bind.__code__.co_argcount))
    monkeypatch.setattr(_peer.importlib, "import_module", lambda name, *a: types.ModuleType(name))
    with pytest.raises(Unavailable, match="has no rms_norm_forward"):   # a release without the entry point
        modules["rmsnorm"].bind(None, None, None, None)
