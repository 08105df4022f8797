"""What every framework's launchers share: the launch configuration carried on the launcher,
so that each record shows what ran and where its config came from; the 1-D kernels' config
space, rule and grid; and the row tuner's scratch problems.

A 1-D config is (threads per block, blocks per SM); ``per_sm`` 0 means enough blocks for one
pass over the data (no grid-stride loop). The kernels take it at launch, so trying a config
costs a timing, not a build."""

# 1024 or 2048 resident threads per SM (the H100/H200 hold 2048), or one pass over the data.
# The rules, where no table holds a kernel: an elementwise kernel 256 threads, one pass over
# the data (the tables' choice at 2^28 elements on both GPUs: 0.97-1.00 of it); a reduction a
# grid the GPU holds at once, 1024 threads and one block an SM (one pass gave CUDA's atomic sum
# 0.69-0.77 of the tuned config on the H200).
RULE = dict(threads=256, per_sm=0)
REDUCTION_RULE = dict(threads=1024, per_sm=1)
CANDIDATES = [dict(threads=t, per_sm=p) for t, p in ((256, 4), (256, 8), (512, 2), (512, 4), (1024, 1), (1024, 2),
                                                     (256, 0), (512, 0))]


def configured(launch, config: dict):
    """Attach the launch configuration to a launcher: the record shows what ran and where
    the config came from (its ``source``)."""
    launch.config = dict(config)
    return launch


def sm_count(device) -> int:
    import torch
    return torch.cuda.get_device_properties(device).multi_processor_count


def blocks_for(n: int, per_thread: int, config: dict, sms: int) -> int:
    """Blocks for ``n`` elements when each thread takes ``per_thread`` a step: one pass over
    them, capped at ``per_sm`` blocks on each of ``sms`` SMs unless per_sm is 0."""
    cover = max(1, -(-n // (config["threads"] * per_thread)))
    return cover if config["per_sm"] == 0 else min(cover, config["per_sm"] * sms)


def with_grid(launch, **grid):
    """A launcher carrying the grid it resolved (blocks), for the record's config."""
    launch.grid = grid
    return launch


def chosen(kernel: str, n: int, dtype, make, device, candidates: list[dict] = CANDIDATES, rule: dict | None = None,
           unrunnable: tuple = ()):
    """The launcher ``make(config)`` builds for the config harness.launch.configs gives ``kernel``
    (its framework, op and variant) at ``n`` elements: this GPU's table's, else ``rule``
    (default RULE); the config, its grid and its source attached. harness-tune searches
    ``candidates``."""
    from harness.launch import configs, tuner

    def check(config):
        if configs.launchable(config) not in candidates:
            raise ValueError(f"{config} is not among this kernel's configs")
    choice = configs.config_for(kernel, n, dtype, None, device, rule or RULE, check,
                                space=lambda: tuner.Candidates(f"{kernel} {n} {dtype}", candidates, make, unrunnable))
    launch = make(choice.config)
    return configured(launch, {**choice.config, **getattr(launch, "grid", {}), "source": choice.source})


def scratch(cols: int, dtype, device, row_operands: int, weights: int):
    """scratch(rows) for the tuner: ``row_operands`` random [rows, cols] tensors, ``weights``
    random [cols] ones, then the output: fresh values, never the case's own inputs."""
    import torch

    def make(rows: int) -> tuple:
        rowwise = [torch.randn(rows, cols, device=device).to(dtype) for _ in range(row_operands)]
        per_column = [(1 + 0.1 * torch.randn(cols, device=device)).to(dtype) for _ in range(weights)]
        return (*rowwise[:1], *per_column, *rowwise[1:], torch.empty(rows, cols, device=device, dtype=dtype))
    return make
