"""A framework with a setting of its own (``frameworks.configured.mode``), one that makes a
series of its own, whose record says the mode it ran with and whether the mode's value was
anywhere in its process's environment."""
import enum
import os
from dataclasses import dataclass

from harness.registry import Framework, impl
from harness.commands.schema import key


class Mode(enum.Enum):
    plain = "plain"
    marked_mode_value = "marked_mode_value"   # a value no environment holds by chance


@dataclass
class ConfiguredSettings:
    mode: Mode = key(Mode.plain, "a setting that only this test framework reads")


class Configured(Framework):
    name = "configured"
    settings_schema = ConfiguredSettings
    series_settings = ("mode",)

    def settings(self):
        return {"mode": self.config.mode.value, "pid": os.getpid(),
                "in_environment": any(Mode.marked_mode_value.value in v for v in os.environ.values())}


@impl("copy", "configured")
def bind(x, out):
    return lambda: out.copy_(x)
