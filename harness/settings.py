"""Run settings that reach the plumbing through the environment: plan._framework_settings
checks each of the run's config values (naming the config key) and sets its variable, for
this process and the workers it starts; the plumbing (the tuner, its cache, a framework's)
reads it back here."""
import os


def choice(variable: str, values: tuple[str, ...]) -> str:
    """The setting held in ``variable``: one of ``values``, the first where it is unset.
    Any other value is a ValueError naming the variable and the choices: a process started
    outside a run (a test, a script) may have set anything."""
    value = os.environ.get(variable, values[0])
    if value not in values:
        raise ValueError(f"{variable}={value!r}: use one of {', '.join(values)}")
    return value
