import os

import pytest
import torch

# Keep the roof cache and the MLflow stores of the tests out of the user's home.
os.environ.setdefault("HARNESS_CACHE", "/tmp/kernel-harness-test-cache")
# Without a GPU, Triton runs under its interpreter, which Triton reads when it is imported:
# set before any test module imports it (as the harness sets it before its impls import
# Triton). Imported without it, every kernel of the process interpreted later fails ("Cannot
# call @triton.jit'd outside of the scope of a kernel").
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _cpu_runner(contract: bool):
    from harness.run.runner import Runner, Settings
    from harness.measure.timing import TimingBudget
    settings = Settings(seeds=3, base_seed=1234, determinism_runs=3,
                        budget=TimingBudget(warmup_ms=0, min_samples=1, max_samples=3, max_seconds=0.05),
                        roof_bytes=16 << 20, roof_cache=False, invocation_id="test", contract=contract)
    return Runner(torch.device("cpu"), settings)


@pytest.fixture(scope="session")
def cpu_runner():
    return _cpu_runner(contract=True)


@pytest.fixture(scope="session")
def numerics_runner():
    """The CPU runner without the launcher's contract: for the other shapes of an impl whose
    contract a test has checked on one (the interpreter's launches are what CI's time is)."""
    return _cpu_runner(contract=False)
