"""What every Numba impl shares at bind: the simulator switch, views of the harness's torch
tensors without a copy, and launchers that only launch.

- Views: on a GPU ``cuda.as_cuda_array`` over the tensor's ``__cuda_array_interface__``; under
  the simulator a simulator array over the tensor's numpy view. Either way the kernel reads
  and writes the tensor's own memory (a copy would fail the harness's bind check). bf16 has
  no Numba type: its tensors are viewed as int16, the bits, which device.py converts.
- Launches: compiled at bind for the bound arguments' types (from the disk cache when there),
  and launched on the stream that is current at each launch, looked up as a raw
  pointer and wrapped once per stream (``cuda.external_stream``): never Numba's default
  (legacy) stream, and never a stream fixed at bind (a CUDA graph capture runs the launcher
  on a stream of its own).
"""
import numpy as np
import torch

from harness.registry import TooLarge
from impls._frameworks.numba import cachedir

cachedir.configure()

from numba import cuda  # noqa: E402
from numba.cuda.core import config as _config  # noqa: E402

SIMULATED = bool(_config.ENABLE_CUDASIM)

if SIMULATED:
    from impls._frameworks.numba import simwarp
    simwarp.install()

# The storage each dtype is viewed as: bf16 as its bits.
STORAGE = {torch.float32: torch.float32, torch.float16: torch.float16, torch.bfloat16: torch.int16}


# The simulator runs a Python thread per CUDA thread and a few microseconds of Python per
# element: past this many elements a launch takes minutes (sum's 2^25-term input set, hours).
SIM_MAX_ELEMENTS = 1 << 22


def view(t: torch.Tensor):
    """A Numba device array over ``t``'s memory (no copy); bf16 as int16 bits."""
    t = t.detach()
    if SIMULATED and t.numel() > SIM_MAX_ELEMENTS:
        raise TooLarge(f"a tensor of {t.numel()} elements is too large for Numba's CUDA simulator (at most "
                       f"{SIM_MAX_ELEMENTS}: a Python thread per CUDA thread); its size is checked on a GPU")
    if t.dim() == 0:
        t = t.view(1)   # a scalar output: element 0 of a 1-element array
    storage = STORAGE.get(t.dtype, t.dtype)
    if storage != t.dtype:
        t = t.view(storage)
    if SIMULATED:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
        return FakeCUDAArray(t.numpy())
    return cuda.as_cuda_array(t, sync=False)


WORD_BYTES = 8
PAIR_BYTES = 16     # the row kernels' chunks: two words, one 16-byte access


def flat(t: torch.Tensor, what: str = "tensor") -> torch.Tensor:
    """``t`` as one flat array of its elements (a row kernel indexes row * cols + column)."""
    if not t.is_contiguous():
        raise ValueError(f"the Numba kernels take a contiguous {what}; got strides {tuple(t.stride())} for shape "
                         f"{tuple(t.shape)}: pass t.contiguous()")
    return t.detach().reshape(-1)


def words(t: torch.Tensor, align: int = WORD_BYTES):
    """(w, phase): ``t``'s memory as 8-byte words from its first ``align``-byte aligned element
    on (a Numba uint64 array, no copy), and that element's flat index; (an empty array, -1)
    when ``t`` has none (fewer elements than a word, or a storage the dtype view refuses). The
    kernels move whole aligned chunks through ``w`` and every other element one at a time."""
    t = flat(t)
    size = t.element_size()
    phase = (-t.data_ptr()) % align // size
    count = (t.numel() - phase) * size // WORD_BYTES
    try:
        if count <= 0 or (-t.data_ptr()) % size:
            raise ValueError("no whole word")
        raw = t[phase:phase + count * WORD_BYTES // size].view(STORAGE.get(t.dtype, t.dtype)).view(torch.int64)
        return view(raw).view(np.uint64), phase
    except (RuntimeError, ValueError):
        return view(torch.zeros(1, dtype=torch.int64, device=t.device)).view(np.uint64), -1


def word_views(*tensors) -> list:
    """(elements, words, phase) of each tensor in turn, flat: a row kernel's arguments (its
    words from the first 16-byte aligned element: the row kernels move 16 bytes at a time)."""
    return [v for t in tensors for v in (view(flat(t)), *words(t, PAIR_BYTES))]


def flat_words(*tensors):
    """Each tensor's flat (elements, words) views and the phase they share (-1, no words, when their
    first aligned elements differ)."""
    views = [(view(flat(t)), *words(t)) for t in tensors]
    phases = {p for _, _, p in views}
    phase = phases.pop() if len(phases) == 1 else -1
    return [v for e, w, _ in views for v in (e, w)], phase


def _raw_stream(device_index: int) -> int:
    get = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if get is not None:
        return get(device_index)
    return torch.cuda.current_stream(device_index).cuda_stream


class TooManyThreads(RuntimeError):
    """A config whose block the compiled kernel cannot run: the tuners skip it."""


class Launch:
    """One kernel launch, its grid and arguments fixed at bind; calling it launches it.

    On the GPU the kernel is compiled for the bound arguments' types at bind (through the
    dispatcher, so from Numba's disk cache when it is there), and each call launches that
    compiled kernel directly: what the dispatcher does per call, less typing every argument
    and looking the kernel up again."""

    def __init__(self, kernel, grid: int, block: int, args: tuple, shared_bytes: int = 0, device=None):
        self.grid_dim, self.block_dim = int(grid), int(block)
        self.args, self.shared_bytes = tuple(args), int(shared_bytes)
        self.kernel = kernel
        if SIMULATED:
            return
        self.device_index = (device.index if device is not None and device.index is not None
                             else torch.cuda.current_device())
        self.argtypes = tuple(kernel.typeof_pyval(a) for a in self.args)
        self.compiled = kernel.compile(self.argtypes)   # now, not when timed
        self._streams = {}
        # Numba compiles without launch bounds: a block larger than the registers allow fails
        # at launch, where the tuner skips the config (TooManyThreads).
        limit = self.compiled.max_threads_per_block
        self.too_many = (f"{self.block_dim} threads a block: {kernel.py_func.__name__} takes at most {limit} "
                         f"({self.registers} registers a thread)") if self.block_dim > limit else None

    @property
    def registers(self):
        """Registers per thread (the tuner's table); None under the simulator."""
        if SIMULATED:
            return None
        try:
            return self.compiled.regs_per_thread   # the compiled kernel's (the dispatcher's lookup wants a Signature)
        except Exception:  # noqa: BLE001 - a detail of the record, never a reason to fail
            return None

    def __call__(self):
        if SIMULATED:
            # The simulator's kernel object holds one launch config at a time: set it every call.
            self.kernel[self.grid_dim, self.block_dim, 0, self.shared_bytes](*self.args)
            return
        if self.too_many:
            raise TooManyThreads(self.too_many)
        ptr = _raw_stream(self.device_index)
        stream = self._streams.get(ptr)
        if stream is None:
            stream = self._streams[ptr] = _core_stream(cuda.external_stream(ptr) if ptr else cuda.default_stream())
        self.compiled.launch(self.args, (self.grid_dim, 1, 1), (self.block_dim, 1, 1), stream, self.shared_bytes)


def _core_stream(stream):
    """The stream as the compiled kernel's launch takes it (cuda.core's), converted as the
    dispatcher converts the stream of ``kernel[grid, block, stream]``."""
    from numba.cuda.cudadrv import driver
    return driver._to_core_stream(stream)


def sequence(*launches):
    """A launcher of several launches, in order, on the current stream."""
    def launch():
        for one in launches:
            one()
    launch.registers = getattr(launches[0], "registers", None) if launches else None
    return launch


def sm_count(device) -> int:
    if SIMULATED or device.type != "cuda":
        return 1
    return torch.cuda.get_device_properties(device).multi_processor_count
