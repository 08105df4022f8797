"""Where a Numba row kernel holds its row between passes (rows.keep: kept in registers,
cached in shared memory, read again) changes no bit: for the smallest group that keeps a row
in registers, each keep the variant has a kernel for is right against the float64 reference
and gives the kept kernel's bits. Shared by the simulator's test (tests/test_numba_sim.py:
short rows, the arithmetic as written) and the GPU's (tests/test_gpu.py: rows of 4096 and 4100
columns, compiled, where NVVM and ptxas could schedule or contract each kernel its own way)."""
import sys

import torch

from harness import registry
from harness.measure.checks import checked_launch
from tests.layouts import misaligned


def row_impls() -> list[tuple[str, str, str]]:
    """The Numba row impls with row kernels (negative controls, the unfused chain, which
    chains rmsnorm's kernel and 1-D steps, and the first kernels, which keep no row, left
    out); their modules loaded."""
    from impls._frameworks.numba.naive import FIRST_KERNELS
    ops, found = registry.ops(), []
    for name, spec in ops.items():
        if spec.row_op and "numba" in registry.impl_modules(name):
            impls, failures = registry.load_impls(name, ["numba"])
            assert not failures, failures
            found += [i.key for i in impls if i.impl == "numba" and i.variant not in spec.negative_controls
                      and (name, i.variant) != ("rmsnorm_silu_mul_add", "unfused")
                      and FIRST_KERNELS.get(name) != i.variant]
    return found


def keeps_of(bind, variant: str) -> tuple:
    """The keeps a variant has kernels for: its module's KEEPS_OF (by algorithm, VARIANTS naming
    them) where it has one (softmax: on_chip caches, three_pass and online read again), else all."""
    from impls._frameworks.numba import rows
    module = sys.modules[bind.__module__]
    if not hasattr(module, "KEEPS_OF"):
        return tuple(rows.KEEPS)
    return module.KEEPS_OF[module.VARIANTS[variant]]


def failures(key, dtype: torch.dtype, device: torch.device, monkeypatch, sizes, rows_per_case: int,
             cases_at) -> list[str]:
    """What went wrong for impl ``key``: for each (cols, offset) of ``sizes`` and each input set
    of ``cases_at(offset)``, a keep whose result failed its checks or differs in any bit from
    the kept row's."""
    from impls._frameworks.numba import rows
    op_name, _, variant = key
    op = registry.ops()[op_name]()
    bind = registry.registered()[key].bind
    itemsize = torch.empty(0, dtype=dtype).element_size()
    keeps, found = keeps_of(bind, variant), []
    for cols, offset in sizes:
        group = 1
        while not rows.shape(group, cols, True, itemsize)["kept"]:
            group *= 2
        for case in cases_at(offset, op):
            inputs = op.inputs((rows_per_case, cols), dtype, device, seed=cols + 3 * len(case), case=case)
            moved = {k: misaligned(v, offset) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
            outs = {}
            for keep in keeps:
                def config(n, cacheable, size, _keeps=(), keep=keep):   # rows.sim_config's signature
                    c = rows.shape(group, n, cacheable, size)
                    c = {**c, "kept": keep == rows.KEPT, "cached": keep == rows.CACHED}
                    if c["cached"] and rows.cache_bytes(c, n) > rows.SHARED_LIMIT:
                        c["threads"] = max(group, 32)   # fewer rows a block, so that they fit
                    return c
                monkeypatch.setattr(rows, "SIMULATED", True)   # row_launcher takes sim_config: no tuning
                monkeypatch.setattr(rows, "sim_config", config)
                out = misaligned(op.make_output(moved), offset)
                launch = bind(**moved, out=out)
                assert rows.keep(launch.config) == keep and launch.config["group"] == group, launch.config
                result, _ = checked_launch(op, launch, moved, out, dtype, case, cols, lambda: None)
                if not result.passed:
                    found.append(f"{cols} columns, {case}, {rows.KEEPS[keep]}: {result.detail}")
                outs[keep] = out.clone()
            for keep, got in outs.items():
                if not torch.equal(got.view(torch.uint8), outs[rows.KEPT].view(torch.uint8)):
                    found.append(f"{cols} columns, {case}: the row {rows.KEEPS[keep]} gave other bits than "
                                 "the row kept")
    return found
