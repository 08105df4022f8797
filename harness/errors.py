"""Errors a user can fix: each names the problem and the valid choices."""
import difflib


class ConfigError(ValueError):
    """Bad input on the command line or in the config. The CLI prints it and exits 2."""


def unknown(kind: str, value, valid) -> ConfigError:
    valid = sorted(valid)
    close = difflib.get_close_matches(str(value), valid, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(f"unknown {kind} {value!r}{hint}; valid: {', '.join(valid)}")
