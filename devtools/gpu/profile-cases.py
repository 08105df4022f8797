"""Launch harness cases once each inside an NVTX range named "profile", for Nsight Compute
(`ncu --nvtx --nvtx-include "profile/" ...`): each case is bound as the harness binds it
(tuned, or the tuner's kept choice from $HARNESS_CACHE), launched once outside the range
(compiles, tunes, warms), then once inside it. Cases: OP:IMPL:VARIANT:DTYPE:ROWSxCOLS, e.g.
layernorm:cuda:two_pass:float32:32768x4096 (VARIANT `-` where the impl has none)."""
import sys

import torch

from harness import registry


def main(cases: list[str]) -> None:
    device = torch.device("cuda:0")
    for case in cases:
        op_name, impl, variant, dtype, shape = case.split(":")
        registry.frameworks()[impl].prepare(device)   # before its modules are imported, as the runner does
        _, failures = registry.load_impls(op_name, [impl])
        if failures:
            sys.exit(f"{case}: {failures[0].reason}")
        op = registry.ops()[op_name]()
        inputs = op.inputs(tuple(int(n) for n in shape.split("x")), getattr(torch, dtype), device, seed=1)
        out = op.make_output(inputs)
        launch = registry.registered()[(op_name, impl, variant)].bind(**inputs, out=out)
        print(case, getattr(launch, "config", None), flush=True)
        launch()
        torch.cuda.synchronize()
        with torch.cuda.nvtx.range("profile"):
            launch()
        torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1:])
