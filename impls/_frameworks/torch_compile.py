"""torch.compile (Inductor) as a peer: the eager function of each op, compiled.

Shapes are static, except the row count of row ops (``rows_dynamic``): a serving stack
sees varying batch sizes and fixed hidden sizes, and so do our Triton kernels (compiled
per hidden size and dtype, rows a runtime argument). ``frameworks.torch_compile.shapes=static``
compiles every shape on its own instead:
the peer at its fastest, at a compile per shape (on the H200 the softmax measured 1393
GB/s compiled with dynamic rows, where a static compile reached 1726 at bf16 32768x4096,
timed by triton's do_bench). Compilation happens in ``bind``'s first launch (the checks),
never in the timed region. ``fullgraph=True`` makes a graph
break an error instead of a silent fall-back to eager.
"""
import enum
import shutil
from dataclasses import dataclass

import torch

from harness.run import progress

from harness import registry
from harness.registry import Framework
from harness.commands.schema import key


class Shapes(enum.Enum):
    dynamic_rows = "dynamic_rows"
    static = "static"


@dataclass
class TorchCompileSettings:
    shapes: Shapes = key(Shapes.dynamic_rows, "dynamic_rows: one kernel per row length; static: one per shape "
                         "(the peer at its fastest, compiles more)")


def shapes() -> str:
    return registry.framework("torch_compile").config.shapes.value


class TorchCompile(Framework):
    name = "torch_compile"
    settings_schema = TorchCompileSettings
    series_settings = ("shapes",)   # compiled per shape it is another peer than per row length

    def settings(self):
        return {"shapes": shapes()}

    def unusable(self, device):
        if device.type == "cpu" and not (shutil.which("g++") or shutil.which("c++")):
            return "torch.compile on CPU needs a C++ compiler (g++), and none is on PATH"
        if device.type == "cuda":
            try:
                import triton  # noqa: F401  (Inductor generates Triton kernels on CUDA)
            except ImportError as e:
                return f"torch.compile on CUDA needs triton: {e}"
        return None


def compiled(fn):
    """``fn`` compiled once per process (Dynamo caches per code object and shape)."""
    # Every shape and dtype of a sweep is a recompile of the same code object: lift the
    # limit so that a long sweep never silently falls back to eager.
    torch._dynamo.config.cache_size_limit = 4096
    if hasattr(torch._dynamo.config, "recompile_limit"):
        torch._dynamo.config.recompile_limit = 4096
    # Only dims marked by rows_dynamic are dynamic; a new N of a 1-D op is a new static kernel.
    torch._dynamo.config.automatic_dynamic_shapes = False
    _say_when_compiling()
    cache = compiled.__dict__.setdefault("cache", {})
    if fn not in cache:
        cache[fn] = torch.compile(fn, fullgraph=True)
    return cache[fn]


def _say_when_compiling() -> None:
    """Each Dynamo compile (a first launch, a new shape) shows in the run's progress."""
    if compiled.__dict__.get("hooked"):
        return
    compiled.hooked = True
    try:
        torch._dynamo.callback.on_compile_start(lambda *args, **kw: progress.phase("torch.compile: compiling"))
    except AttributeError:   # a torch without compile callbacks: no phase, the same results
        pass


def rows_dynamic(*tensors):
    """Mark dim 0 (rows) dynamic: one compiled kernel serves every batch size (unless the
    shapes are static)."""
    if shapes() == "static":
        return
    for t in tensors:
        torch._dynamo.maybe_mark_dynamic(t, 0)
