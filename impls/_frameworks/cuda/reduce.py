"""The 1-D reductions' launchers (sum, max; reduce_1d.cuh): scratch allocated at bind. two_pass: a partial per block, then one block over them; atomic: one launch, an
accumulator and a ticket counter that every launch leaves zeroed (two launches of one binding
must not overlap: they run in stream order)."""
import torch

from impls._frameworks._launch import REDUCTION_RULE
from impls._frameworks.cuda.launch import blocks_for, chosen, with_grid

VARIANTS = ("two_pass", "atomic")


def bind_reduce(kernel, name: str, variant: str, x, out):
    """A launcher of ``kernel(x, out, scratch, atomic, threads, blocks)`` for ``variant``."""
    atomic = variant == "atomic"

    def make(config):
        threads, blocks = config["threads"], blocks_for(x.numel(), x.element_size(), config, x.device)
        scratch = torch.zeros(2 if atomic else blocks, dtype=torch.float32, device=x.device)
        return with_grid(lambda: kernel(x, out, scratch, atomic, threads, blocks), blocks=blocks)
    return chosen(f"{name} {variant}", x.numel(), x.dtype, make, x.device, REDUCTION_RULE)
