"""Where a number came from: device, driver, clocks, library versions, code version, host."""
from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import subprocess
import tempfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
# The harness's own; each framework names its packages (Framework.packages).
PACKAGES = ("torch", "hydra-core", "omegaconf", "mlflow", "numpy")


def _versions() -> dict[str, str]:
    from harness import registry
    found = {}
    for name in (*PACKAGES, *(p for fw in registry.frameworks().values() for p in fw.packages)):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def git_state() -> tuple[str | None, bool | None]:
    """(SHA, dirty). In a container built without .git, the image bakes HARNESS_GIT_SHA."""
    if os.environ.get("HARNESS_GIT_SHA"):
        return os.environ["HARNESS_GIT_SHA"], os.environ.get("HARNESS_GIT_DIRTY") == "1"
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        return sha, bool(dirty)
    except (OSError, subprocess.SubprocessError):
        return None, None


def source_tree() -> str | None:
    """The git tree id of the checkout's files as they are (tracked and untracked, .gitignore
    respected): what a commit of them would record. It names the sources a dirty checkout ran
    (a GPU machine given a copy of a working tree reports an older HEAD, and "dirty"): equal to
    ``git rev-parse <commit>^{tree}`` for the commit with the same files. Computed with a
    throwaway index, so the checkout's own index is left as it is."""
    if os.environ.get("HARNESS_GIT_TREE"):
        return os.environ["HARNESS_GIT_TREE"]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
            subprocess.run(["git", "add", "-A", "."], cwd=REPO, env=env, capture_output=True, timeout=60, check=True)
            return subprocess.run(["git", "write-tree"], cwd=REPO, env=env, capture_output=True, text=True,
                                  timeout=10, check=True).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def pin_source_tree() -> None:
    """Compute source_tree once and hand it to this process's workers (HARNESS_GIT_TREE), so
    that every record of a run names the tree the run began with, hashed once."""
    if not os.environ.get("HARNESS_GIT_TREE"):
        tree = source_tree()
        if tree:
            os.environ["HARNESS_GIT_TREE"] = tree


def _nvml(index: int) -> dict:
    """Driver, UUID and clocks through NVML (nvidia-ml-py), when it is there."""
    try:
        import pynvml
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(index)

        def s(v):
            return v.decode() if isinstance(v, bytes) else v

        info = {
            "driver": s(pynvml.nvmlSystemGetDriverVersion()),
            "gpu_uuid": s(pynvml.nvmlDeviceGetUUID(h)),
            "sm_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
            "sm_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
            "mem_clock_max_mhz": pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM),
        }
        try:
            info["clock_slowdowns"] = _slowdowns(pynvml, pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h))
        except pynvml.NVMLError:
            pass
        try:
            info["power_limit_w"] = pynvml.nvmlDeviceGetPowerManagementLimit(h) / 1000
        except pynvml.NVMLError:
            pass
        return info
    except Exception:  # noqa: BLE001 - NVML missing or refused: provenance is best-effort
        return {}


# NVML's reasons for clocks held below their maximum that slow a memory-bound kernel down
# (idle, application-clock settings and the software power cap's gentle trimming are not among them).
SLOWDOWNS = {"nvmlClocksThrottleReasonHwSlowdown": "hardware slowdown",
             "nvmlClocksThrottleReasonSwThermalSlowdown": "thermal (software)",
             "nvmlClocksThrottleReasonHwThermalSlowdown": "thermal (hardware)",
             "nvmlClocksThrottleReasonHwPowerBrakeSlowdown": "power brake"}


def _slowdowns(pynvml, mask: int) -> list[str]:
    return [what for name, what in SLOWDOWNS.items() if mask & getattr(pynvml, name, 0)]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect(device: torch.device) -> dict:
    sha, dirty = git_state()
    prov = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": _versions(),
        "torch_cuda": torch.version.cuda,
        "git_sha": sha,
        "git_dirty": dirty,
        "git_tree": source_tree(),
        "container_image": os.environ.get("HARNESS_IMAGE") or ("unknown (in a container)"
                                                               if Path("/.dockerenv").exists() else None),
        "device": str(device),
        "cpu_model": _cpu_model(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        prov.update({
            "gpu_name": props.name,
            "gpu_capability": f"{props.major}.{props.minor}",
            "gpu_sms": props.multi_processor_count,
            "gpu_memory_bytes": props.total_memory,
            "gpu_l2_bytes": getattr(props, "L2_cache_size", None),
        })
        prov.update(_nvml(device.index or 0))
    else:
        prov["gpu_name"] = None
        prov["cpu_cache_bytes"] = cpu_cache_bytes()
    return prov


def cpu_cache_bytes() -> int | None:
    """The largest CPU cache (the last level) of CPU 0, from sysfs; None where it is not told."""
    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = f.read_text().strip().upper()
            sizes.append(int(text[:-1]) * {"K": 1 << 10, "M": 1 << 20}[text[-1]] if text[-1] in "KM" else int(text))
        except (OSError, ValueError):
            pass
    return max(sizes, default=None)


def refresh_clocks(prov: dict, device: torch.device) -> dict:
    """The clocks read now (they move with load and temperature), for a case's record."""
    if device.type != "cuda":
        return prov
    live = _nvml(device.index or 0)
    return {**prov, **{k: live[k] for k in ("sm_clock_mhz", "mem_clock_mhz", "clock_slowdowns") if k in live}}


# A case timed below these fractions of the maximum clocks ran far below the GPU's normal
# clocks. A memory-bound kernel's time follows the memory clock, which an H200 holds at
# its maximum under load; the SM clock trims with power and temperature by ~10%.
SM_CLOCK_FLOOR = 0.75
MEM_CLOCK_FLOOR = 0.95


def clock_check(prov: dict, device: torch.device, at_start: dict) -> tuple[dict, str]:
    """The clocks at a case's start (``at_start``, its provenance) and right after its
    timing, and a note when the second reading is far below the GPU's maximum clocks or
    NVML reports a slowdown: ({...}, note or "")."""
    if device.type != "cuda":
        return {}, ""
    live = _nvml(device.index or 0)
    if "sm_clock_mhz" not in live:
        return {}, ""
    clocks = {"sm_start_mhz": at_start.get("sm_clock_mhz"), "mem_start_mhz": at_start.get("mem_clock_mhz"),
              "sm_after_mhz": live["sm_clock_mhz"], "mem_after_mhz": live["mem_clock_mhz"],
              "sm_max_mhz": live["sm_clock_max_mhz"], "mem_max_mhz": live["mem_clock_max_mhz"],
              "slowdowns": live.get("clock_slowdowns", [])}
    return clocks, clock_note(clocks)


def clock_note(c: dict) -> str:
    low = []
    if c["sm_max_mhz"] and c["sm_after_mhz"] < SM_CLOCK_FLOOR * c["sm_max_mhz"]:
        low.append(f"SM clock {c['sm_after_mhz']} of {c['sm_max_mhz']} MHz")
    if c["mem_max_mhz"] and c["mem_after_mhz"] < MEM_CLOCK_FLOOR * c["mem_max_mhz"]:
        low.append(f"memory clock {c['mem_after_mhz']} of {c['mem_max_mhz']} MHz")
    low += [f"NVML reports {s}" for s in c.get("slowdowns", [])]
    return ("timed below normal clocks: " + ", ".join(low)) if low else ""
