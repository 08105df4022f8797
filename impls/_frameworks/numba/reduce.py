"""The 1-D reductions' launchers (sum, max): scratch allocated at bind, the grid tuned.

A reduction gives three kernels (impls/sum/numba.py, impls/max/numba.py):
  partials(x, xw, phase, partial, n):            each block's result into partial[block]
  finish(partial, out, count):          one block over the partials, in a fixed tree
  atomic(x, xw, phase, out, acc, ticket, n):     each block's result into acc by an atomic; the
                                        block that takes the last ticket writes out and
                                        leaves acc and ticket as it found them, so the
                                        next launch starts clean (one launch; two
                                        launches of one binding run in stream order)
two_pass: partials then finish, the same bits every run; atomic: one launch."""
from dataclasses import dataclass

import torch

from impls._frameworks.numba.launch import REDUCTION_RULE, blocks_for, chosen, with_grid
from impls._frameworks.numba.runtime import SIMULATED, Launch, flat_words, sequence, view

VARIANTS = ("two_pass", "atomic")
FINISH_THREADS = 1024
SIM_FINISH_THREADS = 64


@dataclass(frozen=True)
class Kernels:
    name: str
    partials: object
    finish: object
    atomic: object
    acc_dtype: torch.dtype      # the atomic accumulator's type
    acc_start: float | int      # its value between launches


def bind_reduce(kernels: Kernels, variant: str, x, out):
    (xs, xw), phase = flat_words(x)
    outs, n = view(out), x.numel()
    finish_threads = SIM_FINISH_THREADS if SIMULATED else FINISH_THREADS

    def make(config):
        threads, blocks = config["threads"], blocks_for(n, config, x.device)
        if variant == "atomic":
            acc = torch.full((1,), kernels.acc_start, dtype=kernels.acc_dtype, device=x.device)
            ticket = torch.zeros(1, dtype=torch.int32, device=x.device)
            launch = Launch(kernels.atomic, blocks, threads, (xs, xw, phase, outs, view(acc), view(ticket), n), device=x.device)
            launch.scratch = (acc, ticket)   # kept alive with the launcher
            return with_grid(launch, blocks=blocks, word_phase=phase)
        partial = torch.empty(blocks, dtype=torch.float32, device=x.device)
        ps = view(partial)
        launch = sequence(Launch(kernels.partials, blocks, threads, (xs, xw, phase, ps, n), device=x.device),
                          Launch(kernels.finish, 1, finish_threads, (ps, outs, blocks), device=x.device))
        launch.scratch = partial
        return with_grid(launch, blocks=blocks, finish_threads=finish_threads, word_phase=phase)
    return chosen(f"{kernels.name} {variant}", n, x.dtype, make, x.device, REDUCTION_RULE)
