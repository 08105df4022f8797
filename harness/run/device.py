"""Which device a run uses, and how much memory it has."""
from __future__ import annotations

import contextlib
import os

import torch

from harness.errors import ConfigError


def resolve(name: str) -> torch.device:
    """``auto`` -> the first CUDA GPU if there is one, else the CPU."""
    name = str(name).strip().lower()
    if name == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or name.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ConfigError(f"device={name}, but no CUDA GPU is visible here "
                              "(torch.cuda.is_available() is False); use device=cpu or device=auto")
        dev = torch.device(name if ":" in name else "cuda:0")
        if dev.index >= torch.cuda.device_count():
            raise ConfigError(f"device={name}, but only {torch.cuda.device_count()} CUDA device(s) exist")
        return dev
    raise ConfigError(f"unknown device {name!r}; valid: auto, cpu, cuda, cuda:N")


def memory_bytes(device: torch.device) -> int:
    """Memory a case may use: free GPU memory, or available host memory."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def case_stream(device: torch.device) -> "torch.cuda.Stream | None":
    """The stream cases run on: a CUDA stream of their own (not the legacy default stream);
    None on a CPU."""
    return torch.cuda.Stream(device) if device.type == "cuda" else None


def on_stream(stream: "torch.cuda.Stream | None"):
    """A context in which ``stream`` is current (nothing, for None)."""
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
