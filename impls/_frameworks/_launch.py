"""What every framework's launchers share: the launch configuration carried on the launcher,
so that each record shows what ran and what the tuner chose it from."""


def configured(launch, config: dict, tuning: dict | None = None):
    """Attach the launch configuration (and the tuner's table) to a launcher: the record
    shows what ran and what it was chosen from."""
    launch.config = dict(config)
    launch.tuning = dict(tuning or {})
    return launch
