"""Stand-in kernels for the Triton compile pool's tests (tests/test_triton_pool.py): a pool
process finds each by its module and name, as it finds a @triton.jit kernel, and calls its
warmup with the build's arguments."""
import json
import os


def _named(name):
    def fn():
        pass
    fn.__qualname__ = fn.__name__ = name
    fn.__module__ = __name__
    return fn


class Kernel:
    def __init__(self, name, action):
        self.fn, self.action = _named(name), action

    def warmup(self, *args, grid, **kwargs):
        return self.action(args, grid, kwargs)


def _record(args, grid, kwargs):
    """Writes what it was given, tensors as Triton sees them (dtype, data_ptr)."""
    seen = [{"dtype": str(a.dtype), "address": a.data_ptr()} if hasattr(a, "data_ptr") else a for a in args]
    with open(os.environ["POOL_TEST_OUT"], "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "args": seen, "grid": list(grid), "kwargs": kwargs}) + "\n")


def _out_of_resources(args, grid, kwargs):
    from triton.runtime.errors import OutOfResources
    raise OutOfResources(kwargs.get("BLOCK", 0) * 1024, 232448, "shared memory")


def _die(args, grid, kwargs):
    os._exit(3)   # a compiler that crashes its process


good = Kernel("good", _record)
too_big = Kernel("too_big", _out_of_resources)
dies = Kernel("dies", _die)
elsewhere = Kernel("not_in_this_module", _record)   # a pool process cannot find it by its name
