"""Impls written as a dishonest (or careless) author would, to flatter a number while giving
the right answer to the checks: each must end INVALID or FAIL with a reason that names what
it did, or, for determinism and batch invariance, have the property reported as it is.

    HARNESS_PLUGINS=tests.plugins.cheats harness op=rmsnorm impl=cheats
    harness-faults --plugins tests.plugins.cheats

Each cheat states what it does; EXPECTED says how the harness labels it. Cheats a CPU can
not show (work off the stream, skipped work found by the physical limit) are in faults.py.
"""
import sys
import threading
import time

import torch
import torch.nn.functional as F

from harness.measure.faultsuite import Expect
from harness.registry import Framework, impl


class Cheats(Framework):
    name = "cheats"


def _rmsnorm(x, weight, eps):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


STALE = "kept the bits it had before"
EXPECTED = {(op, "cheats", variant): exp for (op, variant), exp in {
    ("rmsnorm", "memo_by_version"): Expect("invalid", STALE),
    ("rmsnorm", "memo_by_shape"): Expect("fail", "outside tolerance"),
    ("rmsnorm", "returns_cached"): Expect("invalid", "does not recompute"),
    ("rmsnorm", "tail_after_last_pack"): Expect("fail", "NaN where a number was due"),
    ("rmsnorm", "writes_past_end"): Expect("invalid", "writes outside its output"),
    ("rmsnorm", "writes_before_start"): Expect("invalid", "writes outside its output"),
    ("copy", "returns_input"): Expect("invalid", "returns its input x"),
    ("rmsnorm", "returns_lazy"): Expect("invalid", "not a plain torch.Tensor"),
    ("rmsnorm", "batch_probe"): Expect("ok", field="batch_invariant", value=False),
    ("rmsnorm", "det_by_memo"): Expect("invalid", STALE),
    ("rmsnorm", "knows_the_refill"): Expect("invalid", STALE),
    ("sum", "skips_when_written"): Expect("invalid", STALE),
    # On a CPU: "works after the launcher returned" (tests/test_honesty.py); on a GPU the
    # thread's work runs on its own current stream, the legacy default stream.
    ("rmsnorm", "background_thread"): Expect("invalid"),
    ("softmax", "skips_nan_rows"): Expect("fail", "left as the poison"),
    # Not a cheat: inexact on other values, as a kernel can be. Wrong, but computed afresh.
    ("rmsnorm", "off_on_refill"): Expect("fail", "x refilled in place after bind (seed"),
}.items()}


# --- results kept between launches -----------------------------------------------------

@impl("rmsnorm", "cheats", variant="memo_by_version")
def memo_by_version(x, weight, eps, out):
    """Keeps its answer, keyed by the inputs' pointers and torch's version counters (which
    every in-place write through the tensor bumps), and only copies it out while they hold:
    a launch of a reduction at the cost of writing its result."""
    memo = {}

    def launch():
        key = (x.data_ptr(), x._version, weight.data_ptr(), weight._version)
        if key not in memo:
            memo.clear()
            memo[key] = _rmsnorm(x, weight, eps)
        out.copy_(memo[key])
    return launch


_BY_SHAPE: dict = {}


@impl("rmsnorm", "cheats", variant="memo_by_shape")
def memo_by_shape(x, weight, eps, out):
    """Keeps the first answer for each shape and dtype, for every later bind of that shape."""
    key = (tuple(x.shape), x.dtype)

    def launch():
        if key not in _BY_SHAPE:
            _BY_SHAPE[key] = _rmsnorm(x, weight, eps)
        out.copy_(_BY_SHAPE[key])
    return launch


@impl("rmsnorm", "cheats", variant="returns_cached")
def returns_cached(x, weight, eps, out):
    """Returns (does not write ``out``) one tensor, computed on the first call."""
    kept = []

    def launch():
        if not kept:
            kept.append(_rmsnorm(x, weight, eps))
        return kept[0]
    return launch


@impl("rmsnorm", "cheats", variant="det_by_memo")
def det_by_memo(x, weight, eps, out):
    """A nondeterministic kernel (an ulp of jitter) that hides it by keeping its first
    result while the inputs' pointers and version counters hold: det=yes, falsely."""
    memo = {}

    def launch():
        key = (x.data_ptr(), x._version, weight.data_ptr(), weight._version)
        if key not in memo:
            memo.clear()
            y = F.rms_norm(x.float(), (x.shape[-1],), weight.float(), eps)
            jitter = torch.randint(0, 2, y.shape, device=y.device).to(y.dtype)
            memo[key] = torch.nextafter(y, y + jitter).to(x.dtype)
        out.copy_(memo[key])
    return launch


@impl("rmsnorm", "cheats", variant="knows_the_refill")
def knows_the_refill(x, weight, eps, out):
    """Computes at bind the answer for x, and for the fresh inputs the harness would refill x
    with were their seed predictable (base seed + 500, for base seeds 0 and 1234); a launch
    reads one element of x to choose which answer to copy out."""
    from harness.registry import ops
    spec = ops()["rmsnorm"](eps=eps)
    first = lambda t: float(t.view(-1)[0])  # noqa: E731
    answers = {(first(x), first(weight)): _rmsnorm(x, weight, eps)}
    for seed in (500, 1734):   # x refilled, then the weight too
        fresh = spec.inputs(tuple(x.shape), x.dtype, x.device, seed)
        answers[(first(fresh["x"]), first(weight))] = _rmsnorm(fresh["x"], weight, eps)
        answers[(first(fresh["x"]), first(fresh["weight"]))] = _rmsnorm(fresh["x"], fresh["weight"], eps)
    any_answer = next(iter(answers.values()))

    def launch():
        out.copy_(answers.get((first(x), first(weight)), any_answer))
    return launch


@impl("sum", "cheats", variant="skips_when_written")
def skips_when_written(x, out):
    """Sums only when its output holds NaN (as the checks leave it before a launch); else
    returns at once, its last answer still there: every timed launch is empty."""
    def launch():
        if torch.isnan(out):
            out.copy_(x.sum(dtype=torch.float32))
    return launch


@impl("rmsnorm", "cheats", variant="off_on_refill")
def off_on_refill(x, weight, eps, out):
    """Computes from its inputs on every launch, and is off in one element (by 2^-10 of it, a
    half-precision ulp, far outside fp32's tolerance) on any values but those it was bound
    to: right on the checked inputs, wrong once they are refilled in place. Its output
    changes with the refill: an accuracy failure (FAIL), not a launcher that kept an answer."""
    bound = x.clone()   # to tell the refilled values apart, never to answer from

    def launch():
        out.copy_(_rmsnorm(x, weight, eps))
        if not torch.equal(x, bound):
            out.view(-1)[0] *= 1 + 2.0 ** -10
    return launch


# --- what is written, and where -------------------------------------------------------

PACK = 16   # bytes of a vector store


@impl("rmsnorm", "cheats", variant="tail_after_last_pack")
def tail_after_last_pack(x, weight, eps, out):
    """Stores whole 16-byte packs only: the elements after the last whole pack of the output
    stay unwritten (none at sizes that are a multiple of the pack)."""
    per_pack = PACK // out.element_size()
    whole = out.numel() // per_pack * per_pack

    def launch():
        out.view(-1)[:whole].copy_(_rmsnorm(x, weight, eps).view(-1)[:whole])
    return launch


def _storage_elements(out):
    """All of ``out``'s storage as a 1-D tensor of its dtype: what a kernel given its pointer
    can reach without faulting (the allocation; past it on a GPU lies the next block)."""
    flat = torch.empty(0, dtype=out.dtype, device=out.device)
    return flat.set_(out.untyped_storage(), 0, (out.untyped_storage().nbytes() // out.element_size(),))


@impl("rmsnorm", "cheats", variant="writes_past_end")
def writes_past_end(x, weight, eps, out):
    """Right output, then one more pack of stores after its end, as a tail loop whose bound
    is rounded up would, wherever the allocation has room for it."""
    def launch():
        out.copy_(_rmsnorm(x, weight, eps))
        whole = _storage_elements(out)
        end = out.storage_offset() + out.numel()
        whole[end:end + PACK // out.element_size()] = 0
    return launch


@impl("rmsnorm", "cheats", variant="writes_before_start")
def writes_before_start(x, weight, eps, out):
    """Right output, then a store one element before its start (an index off by one)."""
    def launch():
        out.copy_(_rmsnorm(x, weight, eps))
        start = out.storage_offset()
        if start:
            _storage_elements(out)[start - 1] = 0
    return launch


@impl("copy", "cheats", variant="returns_input")
def returns_input(x, out):
    """Returns x itself: the values a copy should have, and no work at all."""
    return lambda: x


class _Lazy(torch.Tensor):
    """A tensor whose values are computed when something reads them, not at the launch."""

    @staticmethod
    def __new__(cls, thunk, like):
        t = torch.Tensor._make_wrapper_subclass(cls, like.shape, dtype=like.dtype, device=like.device)
        t.thunk = thunk
        return t

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def real(a):
            return a.thunk() if isinstance(a, _Lazy) else a
        return func(*[real(a) for a in args], **{k: real(v) for k, v in (kwargs or {}).items()})


@impl("rmsnorm", "cheats", variant="returns_lazy")
def returns_lazy(x, weight, eps, out):
    """Returns a tensor subclass that computes its values when the checks read them: the
    timed launch only builds the wrapper."""
    return lambda: _Lazy(lambda: _rmsnorm(x, weight, eps), x)


@impl("softmax", "cheats", variant="skips_nan_rows")
def skips_nan_rows(x, out):
    """Leaves rows whose answer is NaN (all -inf) unwritten, relying on whatever the output
    held: right only where it held NaN, as the harness's poison does."""
    def launch():
        y = torch.softmax(x, dim=-1)
        keep = ~torch.isinf(x).all(dim=-1)
        out[keep] = y[keep]
    return launch


# --- determinism and batch invariance -------------------------------------------------

def _ordered_rmsnorm(x, weight, eps, flip):
    """RMSNorm whose mean square comes out 16 ulps apart in two orders of the sum (``flip``),
    as a long row's can: both within tolerance, the bits differ."""
    xf = x.float()
    ms = xf.square().mean(-1, keepdim=True)
    if flip:
        ms = ms * (1 + 2.0 ** -19)
    return (xf * torch.rsqrt(ms + eps) * weight.float()).to(x.dtype)


@impl("rmsnorm", "cheats", variant="batch_probe")
def batch_probe(x, weight, eps, out):
    """Batch-variant (odd batches sum in another order), but when x is a view into a larger
    batch (how a probe of fewer rows might be made) it computes that whole batch and returns
    its rows: the bits of the full batch, whatever the batch size claimed."""
    storage_rows = x.untyped_storage().nbytes() // (x.shape[1] * x.element_size())

    def launch():
        if storage_rows > x.shape[0] and x.is_contiguous() and x.storage_offset() == 0:
            full = torch.empty(0, dtype=x.dtype, device=x.device)
            full = full.set_(x.untyped_storage(), 0, (storage_rows, x.shape[1]))
            out.copy_(_ordered_rmsnorm(full, weight, eps, storage_rows % 2)[:x.shape[0]])
        else:
            out.copy_(_ordered_rmsnorm(x, weight, eps, x.shape[0] % 2))
    return launch


# --- work after the launcher returns -----------------------------------------------------

@impl("rmsnorm", "cheats", variant="background_thread")
def background_thread(x, weight, eps, out):
    """Hands the work to a thread and returns at once, unless the output still holds NaN
    (as the checks leave it), when it waits: the wall clock around a launch times a
    thread's start. The thread starts its work once the launcher has returned, as a GPU's
    queue would (on a loaded CPU a thread that only slept could finish first), and 2 ms
    after that (a queue ahead of it)."""
    def work(caller: int | None):
        while caller is not None and any(f.f_code is launch.__code__ for f in _stack(caller)):
            time.sleep(0.0002)
        time.sleep(0.002)
        out.copy_(_rmsnorm(x, weight, eps))

    def launch():
        watched = bool(torch.isnan(out.view(-1)[0]))
        t = threading.Thread(target=work, args=(None if watched else threading.get_ident(),))
        t.start()
        if watched:
            t.join()
    return launch


def _stack(thread: int):
    """The frames of ``thread``'s stack, innermost first."""
    f = sys._current_frames().get(thread)
    while f is not None:
        yield f
        f = f.f_back
