"""What every framework's launchers share: the launch configuration carried on the launcher,
so that each record shows what ran and what the tuner chose it from, and the row tuner's
scratch problems."""


def configured(launch, config: dict, tuning: dict | None = None):
    """Attach the launch configuration (and the tuner's table) to a launcher: the record
    shows what ran and what it was chosen from."""
    launch.config = dict(config)
    launch.tuning = dict(tuning or {})
    return launch


def scratch(cols: int, dtype, device, row_operands: int, weights: int):
    """scratch(rows) for the tuner: ``row_operands`` random [rows, cols] tensors, ``weights``
    random [cols] ones, then the output: fresh values, never the case's own inputs."""
    import torch

    def make(rows: int) -> tuple:
        rowwise = [torch.randn(rows, cols, device=device).to(dtype) for _ in range(row_operands)]
        per_column = [(1 + 0.1 * torch.randn(cols, device=device)).to(dtype) for _ in range(weights)]
        return (*rowwise[:1], *per_column, *rowwise[1:], torch.empty(rows, cols, device=device, dtype=dtype))
    return make
