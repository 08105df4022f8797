"""tl.reduce under the interpreter as a tree of the kernel's own combine
(impls/_frameworks/triton/tree_reduce.py): the project's three combines take that path, not
the interpreter's one-call-per-lane fold, and give the fold's answer (the maximum's bits
exactly, NaN included; the merges to fp32 rounding, since a tree adds in another order)."""
import pytest
import torch

from harness.registry import frameworks

frameworks()["triton"].prepare(torch.device("cpu"))   # the interpreter and the tree, before the kernels
triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402
from triton.runtime import interpreter  # noqa: E402

from impls.layernorm.triton import _chan_merge  # noqa: E402
from impls.softmax.triton import _online_combine  # noqa: E402
from impls.sum.triton import _max_nan  # noqa: E402

ROWS, COLS = 4, 64   # both powers of two, as every Triton block is


@triton.jit
def _reduce_three_ways(x_ptr, m_ptr, d_ptr, mean_ptr, m2_ptr, out_ptr, AXIS: tl.constexpr, ROWS: tl.constexpr,
                       COLS: tl.constexpr):
    """Over AXIS of [ROWS, COLS] lanes: out[0] the NaN-keeping max of x, out[1:3] the online
    softmax's merged (max, sum) of (m, d), out[3:6] Welford's merged (mean, M2, count) of
    (mean, m2, 1)."""
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    width: tl.constexpr = COLS if AXIS == 0 else ROWS   # the kept axis
    kept = tl.arange(0, width)
    tl.store(out_ptr + kept, tl.reduce(tl.load(x_ptr + offs), AXIS, _max_nan))
    m, d = tl.reduce((tl.load(m_ptr + offs), tl.load(d_ptr + offs)), AXIS, _online_combine)
    tl.store(out_ptr + width + kept, m)
    tl.store(out_ptr + 2 * width + kept, d)
    ones = tl.full([ROWS, COLS], 1.0, tl.float32)
    mean, m2, count = tl.reduce((tl.load(mean_ptr + offs), tl.load(m2_ptr + offs), ones), AXIS, _chan_merge)
    tl.store(out_ptr + 3 * width + kept, mean)
    tl.store(out_ptr + 4 * width + kept, m2)
    tl.store(out_ptr + 5 * width + kept, count)


def _run(axis, lanes):
    width = COLS if axis == 0 else ROWS
    out = torch.full((6 * width,), float("nan"))
    _reduce_three_ways[(1,)](*lanes, out, AXIS=axis, ROWS=ROWS, COLS=COLS)
    return out.view(6, width)


@pytest.mark.parametrize("axis", [0, 1])
def test_the_projects_combines_reduce_in_a_tree_with_the_folds_answer(axis, monkeypatch):
    tree = interpreter.ReduceOps.generic_reduce
    assert getattr(tree, "in_a_tree", False), "the Triton framework's prepare did not install the tree"
    gen = torch.Generator().manual_seed(7 + axis)
    x = torch.randn(ROWS, COLS, generator=gen) * 100
    x[1, 5] = -torch.tensor(float("nan")).abs()    # a NaN with the sign bit set: one row's and one column's max
    x[3] = -float("inf")
    m = torch.randn(ROWS, COLS, generator=gen) * 10
    d = torch.rand(ROWS, COLS, generator=gen) + 0.5
    m[2], d[2] = -float("inf"), 0.0                 # lanes that saw only -inf
    mean = torch.randn(ROWS, COLS, generator=gen) + 1e3   # a large mean: the merge's cancellation
    m2 = torch.rand(ROWS, COLS, generator=gen)
    lanes = (x, m, d, mean, m2)
    folds = tree.folds
    got = _run(axis, lanes)
    assert tree.folds == folds, "a combine of the project's fell back to the interpreter's fold"
    monkeypatch.setattr(interpreter.ReduceOps, "generic_reduce", tree.fold)
    want = _run(axis, lanes)
    nan_at = torch.isnan(want[0])
    assert nan_at.any() and torch.equal(torch.isnan(got[0]), nan_at)
    assert torch.equal(got[0][~nan_at], want[0][~nan_at])        # max: the same bits
    # the merges against float64, each as close as the fold's (which adds in another order)
    m64, d64 = m.double(), d.double()
    row_max = m64.amax(axis, keepdim=True)
    sums = (d64 * torch.exp(m64 - row_max)).nan_to_num().sum(axis)
    mean64, lanes_per = mean.double(), mean.shape[axis]
    m2_64 = m2.double().sum(axis) + ((mean64 - mean64.mean(axis, keepdim=True)) ** 2).sum(axis)
    for name, i, ref, rtol in (("max", 1, row_max.squeeze(axis), 0), ("sum", 2, sums, 1e-6),
                               ("mean", 3, mean64.mean(axis), 1e-6), ("M2", 4, m2_64, 1e-4),
                               ("count", 5, torch.full_like(sums, lanes_per), 0)):
        for which, r in (("tree", got[i]), ("fold", want[i])):
            torch.testing.assert_close(r.double(), ref, rtol=rtol, atol=0, msg=lambda e: f"{name} ({which}): {e}")


@triton.jit
def _branchy_max(x, y):
    if x > y:   # a Python branch on a lane's value
        return x
    return y


@triton.jit
def _branchy_kernel(x_ptr, out_ptr, N: tl.constexpr):
    tl.store(out_ptr, tl.reduce(tl.load(x_ptr + tl.arange(0, N)), 0, _branchy_max))


def test_a_combine_that_branches_on_its_values_falls_back_to_the_fold():
    """Such a combine cannot take arrays: the interpreter's fold runs it, and it is counted."""
    tree = interpreter.ReduceOps.generic_reduce
    x = torch.randn(16)
    out = torch.empty(1)
    folds = tree.folds
    _branchy_kernel[(1,)](x, out, N=16)
    assert tree.folds == folds + 1
    assert out.item() == x.max().item()
