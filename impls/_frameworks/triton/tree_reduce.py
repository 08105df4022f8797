"""tl.reduce under Triton's interpreter, with the kernel's own combine applied as a tree.

Triton 3.6's interpreter runs a tl.reduce whose combine is the kernel's own function (the
NaN-keeping maximum, Welford's merge, the online softmax's merge) one element at a time:
for a reduction of N lanes it calls the combine N - 1 times on one-element tensors, in a left
fold. At the 8192 lanes of a 1-D max that is ~8000 Python calls of the interpreted combine
per program, the bulk of CI's time on those kernels. Here the same combine function runs on
whole halves of the reduced axis at once: lane i with lane i + N/2, then again on the
result, log2(N) calls on arrays. Every lane still goes through the kernel's combine code,
and the order is a tree, as the GPU's own reduction is (a thread's lanes, then shuffles at
halving distances), rather than the interpreter's fold. A combine that cannot take arrays
keeps the interpreter's own way, and is counted (``folds``; a test holds the project's
combines to the tree): one that branches on a lane's value (the interpreter would take any
array as true there, so the tree makes that an error and falls back), or one that fails on
arrays in any other way.
"""


def reduce_in_a_tree() -> None:
    """Install the tree into the interpreter (idempotent; nothing without Triton)."""
    try:
        from triton.runtime import interpreter
    except ImportError:
        return
    fold = interpreter.ReduceOps.generic_reduce
    if getattr(fold, "in_a_tree", False):
        return

    def generic_reduce(self, input):
        try:
            return _tree(self, input)
        except Exception:   # noqa: BLE001 - a combine that takes no arrays: the interpreter's fold
            generic_reduce.folds += 1
            return fold(self, input)

    generic_reduce.in_a_tree = True
    generic_reduce.folds = 0
    generic_reduce.fold = fold   # for the test that compares the two
    interpreter.ReduceOps.generic_reduce = generic_reduce


def _tree(self, input):
    import numpy as np
    import triton.language as tl

    original_axis = self.axis
    input, axis = self.unravel(input, self.axis)
    dtypes = [t.dtype for t in input]
    # the reduced axis first: a step combines the leading half with the next half
    lanes = [np.moveaxis(t.handle.data, axis, 0) for t in input]
    if lanes[0].shape[0] & (lanes[0].shape[0] - 1):
        raise ValueError("a tree needs a power-of-two axis, as every Triton block has")
    while lanes[0].shape[0] > 1:
        half = lanes[0].shape[0] // 2
        low = [self.to_tensor(d[:half], dt) for d, dt in zip(lanes, dtypes)]
        high = [self.to_tensor(d[half:], dt) for d, dt in zip(lanes, dtypes)]
        got = _without_branches(self.combine_fn.fn, low + high)
        got = got if isinstance(got, tuple) else (got,)
        if len(got) != len(lanes):
            raise ValueError(f"the combine returned {len(got)} values for {len(lanes)} inputs")
        lanes = [np.array(np.broadcast_to(np.asarray(v.handle.data if isinstance(v, tl.core.tensor) else v,
                                                     dtype=d.dtype), d[:half].shape))
                 for d, v in zip(lanes, got)]
    out = []
    for d, dt in zip(lanes, dtypes):
        data = d[0]
        if self.keep_dims:
            data = np.expand_dims(data, axis) if original_axis is not None else data.reshape((1,) * len(input[0].shape))
        elif original_axis is None:
            data = data.item()
        out.append(self.to_tensor(data, dt))
    return out


def _without_branches(combine, args):
    """``combine(*args)`` with a lane's value refused as a Python bool: on arrays the
    interpreter's bool is True whatever the values, so a branch would go wrong silently."""
    import triton.language as tl

    def lane_bool(self):
        if self.handle.data.size != 1:
            raise TypeError("the combine branches on a lane's value")
        return bool(self.handle.data)

    interpreted = tl.core.tensor.__bool__
    tl.core.tensor.__bool__ = lane_bool
    try:
        return combine(*args)
    finally:
        tl.core.tensor.__bool__ = interpreted
