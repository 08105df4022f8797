"""The 1-D kernels' tiles (copy, scale): one BLOCK-sized tile per program, tuned."""
from harness import tuner
from impls._frameworks.triton.launch import (HINTS, bound_launch, build_all, configured, describe, fingerprint,
                                             interpreting, unrunnable)

# 8 to 16 elements per thread: every thread has two to four independent 16-byte loads in
# flight (the seed text's two knobs, vector width and loads per thread).
TILES = ((1024, 4), (2048, 4), (4096, 8), (8192, 8))


def launch_1d(kernel, args: tuple, n: int, key, device, extra: dict | None = None):
    """A launcher for an elementwise kernel ``kernel[grid](*args, n, BLOCK=...)``. BLOCK,
    num_warps and the cache hints are tuned per ``key`` on the real inputs (the config
    changes no result bits of an elementwise op)."""
    import triton
    if interpreting():
        candidates = [dict(BLOCK=1024, num_warps=4, hints="plain")]
    else:
        candidates = [dict(BLOCK=b, num_warps=w, hints=h) for b, w in TILES for h in HINTS]

    def call(cfg):
        kwargs = dict(**(extra or {}), BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"], **HINTS[cfg["hints"]])
        return (*args, n), kwargs, (triton.cdiv(n, cfg["BLOCK"]),)

    def bind(cfg):
        a, kwargs, grid = call(cfg)
        return bound_launch(kernel, grid, *a, **kwargs)

    tuned = tuner.tune(key, candidates, bind, f"Triton {' '.join(map(str, key))}",
                       fingerprint(kernel, {"candidates": candidates}), device, unrunnable=unrunnable(),
                       precompile=lambda cfgs: build_all((kernel, call(c), describe(c)) for c in cfgs))
    return configured(bind(tuned.config), tuned.config, tuned.table)
