"""Launch harness cases once each inside an NVTX range named "profile", for Nsight Compute
(`ncu --nvtx --nvtx-include "profile/" ...`): each case is bound as the harness binds it
(tuned, or the tuner's kept choice from $HARNESS_CACHE), launched once outside the range
(compiles, tunes, warms), then once inside it. Cases: OP:IMPL:VARIANT:DTYPE:ROWSxCOLS, e.g.
layernorm:cuda:two_pass:float32:32768x4096 (VARIANT `-` where the impl has none), and after
them, optionally, :CONFIG, a row kernel's config as JSON (a record's impl_config): the case
then runs that config, untuned (the row tuner answers with it), e.g.
rmsnorm:cuda:tuned:float32:8192x16384:{"group": 512, "packs": 0, "threads": 512, "trip": 4}."""
import contextlib
import json
import sys

import torch

from harness import registry, tuner


@contextlib.contextmanager
def pinned(config: dict | None):
    """The row tuner's choice for every key and batch is ``config`` while this lasts (None:
    the tuner as it is): a record's config profiled as it ran, not one tuned again here."""
    if config is None:
        yield
        return
    kept = tuner.tune_rows, tuner.for_batch
    tuner.tune_rows = lambda key, space: tuner.Tuned(dict(config))
    tuner.for_batch = lambda tuned, key, rows, space: (dict(tuned.config), {})
    try:
        yield
    finally:
        tuner.tune_rows, tuner.for_batch = kept


def parse(case: str) -> tuple[str, str, str, str, tuple[int, ...], dict | None]:
    """(op, impl, variant, dtype, shape, config or None) of OP:IMPL:VARIANT:DTYPE:ROWSxCOLS[:CONFIG]."""
    op_name, impl, variant, dtype, shape, *config = case.split(":", 5)
    return op_name, impl, variant, dtype, tuple(int(n) for n in shape.split("x")), \
        (json.loads(config[0]) if config else None)


def main(cases: list[str]) -> None:
    device = torch.device("cuda:0")
    for case in cases:
        op_name, impl, variant, dtype, shape, config = parse(case)
        registry.frameworks()[impl].prepare(device)   # before its modules are imported, as the runner does
        _, failures = registry.load_impls(op_name, [impl])
        if failures:
            sys.exit(f"{case}: {failures[0].reason}")
        op = registry.ops()[op_name]()
        inputs = op.inputs(shape, getattr(torch, dtype), device, seed=1)
        out = op.make_output(inputs)
        with pinned(config):
            launch = registry.registered()[(op_name, impl, variant)].bind(**inputs, out=out)
        print(case, getattr(launch, "config", None), flush=True)
        launch()
        torch.cuda.synchronize()
        with torch.cuda.nvtx.range("profile"):
            launch()
        torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1:])
