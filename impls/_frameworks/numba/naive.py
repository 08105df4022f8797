"""The first row kernels' launch (variant ``naive``): what a
newcomer writes first, kept beside the tuned kernels to show the gap. One block a row, each
thread taking the columns threadIdx, threadIdx + BLOCK, ... one element at a time (no vector
loads), the row's statistics by groups' block reduction (xor shuffles in each warp, then shared
memory across the warps). No config table and no tuning: BLOCK threads a block, always, the
block size the CUDA seed's block_per_row takes (in the simulator, fewer: BLOCK)."""
from impls._frameworks._launch import configured
from impls._frameworks.numba.runtime import SIMULATED, Launch, flat, view

# 8 warps a row on a GPU: up to 256 columns in one step, longer rows in steps of 256. In the
# simulator, which runs a Python thread per CUDA thread and makes each barrier a wait on all of
# them, one warp: the shuffles run there, the step across warps on the GPU (at 256 threads
# these kernels took most of the CPU main command's time).
BLOCK = 32 if SIMULATED else 256
# The variant of each op launched here.
FIRST_KERNELS = {"softmax": "naive", "rmsnorm": "naive", "layernorm": "naive"}


def block_per_row(kernel, tensors: tuple, scalars: tuple):
    """The launcher of ``kernel(*tensors flat, cols, *scalars)`` over a grid of one block a row of
    tensors[0] (its rows x cols), with its fixed config attached."""
    rows, cols = tensors[0].shape
    config = {"threads": BLOCK, "rows_per_block": 1, **({"simulated": True} if SIMULATED else {})}
    if rows == 0:
        return configured(lambda: None, config)
    args = (*(view(flat(t)) for t in tensors), cols, *scalars)
    return configured(Launch(kernel, rows, BLOCK, args, device=tensors[0].device), config)
