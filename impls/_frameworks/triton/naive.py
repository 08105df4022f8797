"""The tutorial form of a row kernel (Triton's 02-fused-softmax and 05-layer-norm): one
program per row, the whole row in one block of triton.next_power_of_2(cols) elements,
masked past its end. No table and no tuner: the launch follows from the row length alone,
so these ``naive`` variants show what the tuned kernels beside them add."""
from harness.registry import Unavailable
from impls._frameworks.triton.launch import bound_launch, configured, next_pow2

# The longest row one block holds: 32768 elements (fp32: 64 a thread on 16 warps; compiled
# for sm_90, the LayerNorm and RMSNorm take 128 registers a thread, the most a 512-thread
# block may have, with no local memory). A longer row is refused; the tuned variants walk
# it in column tiles.
MAX_COLS = 32768


def num_warps(block: int) -> int:
    """The rule: 4 warps below 2048 elements, 8 below 8192, 16 from 8192 (the tutorial's
    steps: 4 to 16 elements a thread up to 2048, then more warps rather than more registers)."""
    return 4 if block < 2048 else 8 if block < 8192 else 16


def row_per_program(kernel, what: str, x, out, *args):
    """A launcher of ``kernel[(rows,)](x, *args, BLOCK=...)`` writing ``out`` (one of ``args``,
    the kernel's arguments after x in its order)."""
    if not (x.is_contiguous() and out.is_contiguous()):
        raise ValueError(f"the naive Triton {what} takes contiguous [rows, cols] tensors")
    rows, cols = x.shape
    if cols > MAX_COLS:
        raise Unavailable(f"the naive Triton {what} holds a row in one block of at most {MAX_COLS} elements; "
                          f"rows of {cols} run in the tuned variants")
    block = next_pow2(cols)
    warps = num_warps(block)
    launch = bound_launch(kernel, (rows,), x, *args, BLOCK=block, num_warps=warps)
    return configured(launch, {"rows": 1, "BLOCK": block, "num_warps": warps, "source": "rule"})
