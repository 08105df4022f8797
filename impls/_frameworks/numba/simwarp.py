"""The warp shuffles Numba's CUDA simulator lacks, and a shared array it hands out safely,
for the simulator only.

The simulator runs each CUDA thread of a block as a Python thread and offers syncthreads,
but no warp-level operations. A shuffle here is what it is on the GPU: the 32 lanes of a
warp (fewer in a block's last, partial warp) each put a value in, wait for all, and take
their source lane's value out; a second wait keeps a fast lane's next shuffle from
overwriting a value a slow lane has not read yet. Each block gets its own warps (kept on the
simulator's per-block manager), so blocks run one after another as the simulator runs them.
Only the full mask is supported: every kernel here shuffles with all lanes of a warp.

The simulator's ``cuda.shared.array`` looks its array up by the calling line and makes it
when missing, unlocked: two threads of a block can each make one, and a thread left with its
own writes where no other thread reads (a block reduction then reads np.empty's garbage).
Here the lookup and the making are one step under a lock.

install() adds them to the simulator's kernel-side ``cuda`` module; on a GPU it is never
called, and the kernels run the hardware's shfl.sync and shared memory."""
import sys
import threading

import numpy as np
from numba.core import types
from numba.np import numpy_support

FULL_MASK = 0xFFFFFFFF
WARP = 32
# A lane that dies (an exception in the kernel) leaves its warp-mates waiting: the simulator
# then sets every thread's ``abort`` (the launch raises the lane's error), which a waiting lane
# reads this often. No time limit: a slow lane (a loaded machine, Python threads taking turns
# on the interpreter lock) is waited for, where a fixed limit had broken a healthy launch.
POLL_S = 0.5

_lock = threading.Lock()


class _Warp:
    def __init__(self, lanes: int):
        self.lanes = lanes
        self.values = [None] * lanes
        self.arrived = 0
        self.generation = 0
        self.turn = threading.Condition()

    def _all_here(self) -> None:
        """Wait for every lane of the warp; raise if the launch is aborting."""
        me = threading.current_thread()
        with self.turn:
            generation = self.generation
            self.arrived += 1
            if self.arrived == self.lanes:
                self.arrived, self.generation = 0, generation + 1
                self.turn.notify_all()
                return
            while generation == self.generation:
                if getattr(me, "abort", False):
                    raise RuntimeError("another lane of this warp failed (the launch raises its error)")
                self.turn.wait(POLL_S)

    def exchange(self, lane: int, value, source: int):
        self.values[lane] = value
        self._all_here()
        got = self.values[source] if 0 <= source < len(self.values) else value
        self._all_here()
        return got


def _this_warp(mask):
    if int(mask) & FULL_MASK != FULL_MASK:
        raise NotImplementedError(f"simulated shuffles take the full mask only, got {int(mask):#x}")
    thread = threading.current_thread()
    manager = thread._manager
    warp_id = thread.thread_id // WARP
    with _lock:
        warps = manager.__dict__.setdefault("_harness_warps", {})
        if warp_id not in warps:
            dims = manager._block_dim
            threads = dims[0] * dims[1] * dims[2]
            warps[warp_id] = _Warp(min(WARP, threads - warp_id * WARP))
        return warps[warp_id], thread.thread_id % WARP


def shfl_sync(self, mask, value, src_lane):
    warp, lane = _this_warp(mask)
    return warp.exchange(lane, value, int(src_lane) % WARP)


def shfl_xor_sync(self, mask, value, lane_mask):
    warp, lane = _this_warp(mask)
    return warp.exchange(lane, value, lane ^ int(lane_mask))


def shfl_down_sync(self, mask, value, delta):
    warp, lane = _this_warp(mask)
    source = lane + int(delta)
    return warp.exchange(lane, value, source if source < WARP else lane)


def shfl_up_sync(self, mask, value, delta):
    warp, lane = _this_warp(mask)
    source = lane - int(delta)
    return warp.exchange(lane, value, source if source >= 0 else lane)


_shared_lock = threading.Lock()


def shared_array(self, shape, dtype, alignment=None):
    """FakeCUDAShared.array, one array per calling line for every thread of the block."""
    if shape == 0 or alignment is not None:   # dynamic shared memory: one buffer already
        return _simulators_shared_array(self, shape, dtype, alignment)
    if isinstance(dtype, types.Type):
        dtype = numpy_support.as_dtype(dtype)
    caller = sys._getframe(1)
    key = (caller.f_code.co_filename, caller.f_lineno)
    with _shared_lock:
        found = self._allocations.get(key)
        if found is None:
            found = self._allocations[key] = np.empty(shape, dtype)
    return found


_simulators_shared_array = None


def install() -> None:
    """Give the simulator's kernel-side cuda module the shuffles, and its shared arrays the
    lock (idempotent)."""
    global _simulators_shared_array
    from numba.cuda.simulator.kernelapi import FakeCUDAModule, FakeCUDAShared
    for fn in (shfl_sync, shfl_xor_sync, shfl_down_sync, shfl_up_sync):
        if getattr(FakeCUDAModule, fn.__name__, None) is not fn:
            setattr(FakeCUDAModule, fn.__name__, fn)
    if FakeCUDAShared.array is not shared_array:
        _simulators_shared_array = FakeCUDAShared.array
        FakeCUDAShared.array = shared_array
