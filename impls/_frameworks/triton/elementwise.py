"""The 1-D kernels' tiles (copy, scale, the unfused chain's steps): one BLOCK-sized tile per
program, from this GPU's table (harness.launch.configs), else the rule."""
from impls._frameworks.triton.launch import HINTS, bound_launch, build_all, configured, describe, interpreting, unrunnable

# 8 to 16 elements per thread: every thread has two to four independent 16-byte loads in
# flight (the seed text's two knobs, vector width and loads per thread).
TILES = ((1024, 4), (2048, 4), (4096, 8), (8192, 8))
# Where no table holds the kernel: 2048-element tiles on 4 warps, plain loads: 16 elements a
# thread (two 16-byte loads of fp32, one of 16-bit data, in flight). At the recorded cases of
# 2^26 to 2^28 elements it ran at 0.96 or more of the tuned tile's speed on the H100 and the
# H200; 1024 on 4 warps ran 2^28 bf16 elements at 0.90 on the H200, 2048 at 1.00.
RULE = dict(BLOCK=2048, num_warps=4, hints="plain")


def launch_1d(kernel, args: tuple, n: int, name: str, device, extra: dict | None = None):
    """A launcher for an elementwise kernel ``kernel[grid](*args, n, BLOCK=...)``: BLOCK,
    num_warps and the cache hints from the table's entry for ``name`` (op and variant) at
    ``n`` elements (the config changes no result bits of an elementwise op)."""
    import triton

    from harness.launch import configs, tuner
    candidates = [dict(BLOCK=b, num_warps=w, hints=h) for b, w in TILES for h in HINTS]
    dtype = args[0].dtype

    def call(cfg):
        kwargs = dict(**(extra or {}), BLOCK=cfg["BLOCK"], num_warps=cfg["num_warps"], **HINTS[cfg["hints"]])
        return (*args, n), kwargs, (triton.cdiv(n, cfg["BLOCK"]),)

    def bind(cfg):
        a, kwargs, grid = call(cfg)
        return bound_launch(kernel, grid, *a, **kwargs)

    def check(cfg):
        if cfg not in candidates:
            raise ValueError(f"{cfg} is not among this kernel's tiles")
    if interpreting():
        return configured(bind(RULE), {**RULE, "source": "interpreter"})
    choice = configs.config_for(f"triton {name}", n, dtype, None, device, RULE, check,
                                lambda: tuner.Candidates(f"Triton {name} {n} {dtype}", candidates, bind, unrunnable(),
                                                         lambda cfgs: build_all((kernel, call(c), describe(c))
                                                                                for c in cfgs)))
    return configured(bind(choice.config), {**choice.config, "source": choice.source})
