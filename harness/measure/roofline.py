"""The bandwidth roof: measured on this device at the start of a run, and the datasheet peak.

Four kinds of kernel, timed exactly like the cases (same timer, cold L2); of each kind
the fastest sets the roof, and the roof names it (read_kernel, mix_kernel, copy_kernel):
  read   torch.sum, torch.amax, and on a GPU the frameworks' own streaming reads over N
         bytes (read-only; the results are noise)
  mix    torch.addcmul(a, b, c), and on a GPU the frameworks' own: reads three buffers of N/4
         bytes, writes a fourth (the fused chain's mix)
  copy   dst.copy_(src), and on a GPU the frameworks' own streaming copies
         (Framework.roof_kernels): reads N, writes N bytes
  write  buf.fill_(1)              writes N bytes
An op's roof follows its mix of reads and writes: with f = written / (read + written), the
time per byte is interpolated linearly between the kinds measured: read (f=0), mix
(f=0.25), copy (f=0.5) and write (f=1). The roof is the fastest streaming kernel known for
each: on the H100 the chain ran at 102.6% of a roof interpolated between read and copy.
On a GPU the read, mix and copy kernels are timed again on buffers of the L2's size: a case
moving less than the large buffers takes a roof between the two by its size (Roof._at).
Each kernel is also timed sustained (timing: launches back to back, the L2 write-back each
leaves charged to the next): the roof of a case's ``sustained_us``, ``for_mix(...,
sustained=True)``.
Measured roofs are cached per device (name, UUID, driver) in ``~/.cache/kernel-harness``
for ``max_age_s``; each record says whether its roof was measured in this run or cached.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from harness.run import progress

from harness import registry
from harness.measure.timing import TimingBudget

# Datasheet HBM/GDDR bandwidth, GB/s (10^9 bytes/s), first matching name wins.
DATASHEET_GBPS: list[tuple[str, float]] = [
    ("H200", 4800.0),
    ("GH200", 4000.0),
    ("H100 NVL", 3900.0),
    ("H100 PCIE", 2000.0),
    ("H100", 3350.0),            # SXM5
    ("H800", 3350.0),
    ("B200", 8000.0),
    ("A100-SXM4-80GB", 2039.0),
    ("A100 80GB PCIE", 1935.0),
    ("A100", 1555.0),            # 40 GB
    ("L40S", 864.0),
    ("L40", 864.0),
    ("L4", 300.0),
    ("A10G", 600.0),
    ("RTX 4090", 1008.0),
]


def datasheet_gbps(device_name: str) -> float | None:
    name = device_name.upper()
    for pattern, gbps in DATASHEET_GBPS:
        if pattern.upper() in name:
            return gbps
    return None


@dataclass
class Roof:
    device_name: str
    device_key: str
    copy_gbps: float
    read_gbps: float
    write_gbps: float
    measured_bytes: int
    measured_at: float           # unix time
    timer: str
    source: str = "measured"     # measured | cache
    read_kernel: str = ""        # which read kernel set read_gbps (the fastest)
    copy_kernel: str = ""        # which copy kernel set copy_gbps
    mix_gbps: float | None = None          # 3 reads, 1 write (None: not measured, e.g. an older cache)
    mix_kernel: str = ""
    kernels: dict = dataclasses.field(default_factory=dict)   # every kernel: [GB/s, sustained GB/s], or why not
    # the same kernels timed sustained (None: not timed so, e.g. on a CPU)
    copy_sustained_gbps: float | None = None
    read_sustained_gbps: float | None = None
    write_sustained_gbps: float | None = None
    mix_sustained_gbps: float | None = None
    # the read, mix and copy kernels timed again on buffers of the L2's size (a copy then moves
    # twice the L2, the least the roof check covers): {"bytes": buffer bytes, kind: [GB/s, kernel]}
    near: dict = dataclasses.field(default_factory=dict)

    def for_mix(self, read_bytes: int, written_bytes: int, sustained: bool = False) -> tuple[float | None, str]:
        """The roof of an op moving these bytes, and what it was interpolated from; with
        ``sustained``, from the sustained timings (None where the roof has none)."""
        total = read_bytes + written_bytes
        f = written_bytes / total if total else 0.5
        anchors = ((0.0, self.read_sustained_gbps if sustained else self._at(total, "read", self.read_gbps)),
                   (0.25, self.mix_sustained_gbps if sustained else self._at(total, "mix", self.mix_gbps)),
                   (0.5, self.copy_sustained_gbps if sustained else self._at(total, "copy", self.copy_gbps)),
                   (1.0, self.write_sustained_gbps if sustained else self.write_gbps))
        if any(g is None for w, g in anchors if w != 0.25):
            return None, ""
        known = [(w, 1 / g) for w, g in anchors if g is not None]
        (w0, inv0), (w1, inv1) = next((a, b) for a, b in zip(known, known[1:]) if f <= b[0])
        inv = inv0 + (inv1 - inv0) * (f - w0) / (w1 - w0)
        kind = {0.0: "read", 0.5: "copy", 1.0: "write"}.get(round(f, 3), f"mix w={f:.2f}")
        return 1 / inv, kind

    # bytes a kernel of each kind moves per byte of its buffer (roofline.measure's buffers)
    MOVED = {"read": 1, "mix": 1, "copy": 2}

    def _at(self, total: int, kind: str, far: float | None) -> float | None:
        """A kind's roof for a case moving ``total`` bytes. A single launch leaves up to the
        L2's worth of its writes in the L2, uncharged, so a kernel moving less streams faster
        (on the H100 RMSNorm fp32 moving 128 MiB ran at 102.8% of the copy roof timed moving
        2 GiB): between the size timed near the L2 and the large one, the roof follows the
        size (time per byte linear in log bytes), never below the large one's."""
        near = self.near.get(kind)
        if far is None or not near or near[0] <= far:
            return far
        lo, hi = self.near["bytes"] * self.MOVED[kind], self.measured_bytes * self.MOVED[kind]
        if total >= hi:
            return far
        if total <= lo:
            return near[0]
        t = math.log(total / lo) / math.log(hi / lo)
        return 1 / (1 / near[0] + (1 / far - 1 / near[0]) * t)

    def set_by(self, read_bytes: int, written_bytes: int) -> list[str]:
        """Which kernels set the roof of this mix (``read by ...``); fill_, the write's, unsaid;
        where the case's size takes the roof from the kernels timed near the L2, those too."""
        total = read_bytes + written_bytes
        f = written_bytes / total if total else 0.5
        anchors = [(0.0, "read", self.read_kernel, self.read_gbps),
                   *([(0.25, "mix", self.mix_kernel, self.mix_gbps)] if self.mix_gbps else []),
                   (0.5, "copy", self.copy_kernel, self.copy_gbps), (1.0, "write", "", self.write_gbps)]
        used = [a for a in anchors if a[0] == f] or [max((a for a in anchors if a[0] < f), key=lambda a: a[0]),
                                                      min((a for a in anchors if a[0] > f), key=lambda a: a[0])]
        out = []
        for _, kind, name, far in used:
            out += [f"{kind} by {name}"] if name else []
            if name and self._at(total, kind, far) != far:
                out.append(f"{kind} near the L2 by {self.near[kind][1]} ({self.near['bytes'] >> 20} MiB)")
        return out


def device_key(device: torch.device, provenance: dict) -> str:
    parts = [provenance.get("gpu_name") or "cpu", provenance.get("gpu_uuid") or "",
             provenance.get("driver") or provenance.get("cpu_model") or ""]
    if provenance.get("cpu_threads"):   # a CPU's roof is its threads' (harness.run.runner.CPU_THREADS)
        parts.append(f"{provenance['cpu_threads']} threads")
    return "|".join(parts)


TORCH_KERNELS = ("copy_", "torch.sum", "torch.amax", "torch.addcmul")   # always run: a failure of one is the roof's


def fastest(kernels: dict, gbps, every: dict) -> tuple[float, float | None, str]:
    """(GB/s, sustained GB/s, name) of the fastest of ``kernels`` ({name: launcher}) by
    ``gbps(launcher)`` -> (GB/s, sustained GB/s or None), each way of timing apart; every
    kernel's figures go into ``every``. A framework's kernel that cannot run here (no build
    of it for this GPU) is left out, its error kept in ``every``."""
    timed = {}
    for name, launch in kernels.items():
        try:
            timed[name] = gbps(launch)
        except Exception as e:  # noqa: BLE001 - torch's kernels still give a roof
            if name in TORCH_KERNELS:
                raise
            every[name] = f"not timed: {type(e).__name__}: {str(e)[:200]}"
    every.update({name: list(t) for name, t in timed.items()})
    best = max(timed, key=lambda k: timed[k][0])
    sustained = [s for _, s in timed.values() if s is not None]
    return timed[best][0], max(sustained) if sustained else None, best


def framework_kernels(frameworks: dict, src: torch.Tensor, dst: torch.Tensor,
                      every: dict) -> tuple[dict, dict]:
    """({name: launcher} of reads, of mixes, of copies) that ``frameworks`` ({name:
    Framework}) offer the roof (Framework.roof_kernels). One that cannot offer them here
    (an ImportError: not installed) is left out, and ``every`` says why."""
    readers, mixers, copiers = {}, {}, {}
    for name, framework in frameworks.items():
        try:
            offered = framework.roof_kernels(src, dst)
        except ImportError as e:
            every[f"{name} roof kernels"] = f"not timed: {e}"
            continue
        kinds = {"read": readers, "mix": mixers, "copy": copiers}
        for kind, kernels in offered.items():
            if kind not in kinds:
                raise ValueError(f"framework {name} offers roof kernels of kind {kind!r}; the kinds are read, mix "
                                 "and copy")
            taken = set(kernels) & (set(TORCH_KERNELS) | set(readers) | set(mixers) | set(copiers))
            if taken:
                raise ValueError(f"framework {name}'s roof kernels {sorted(taken)} have names already taken; "
                                 "give them names of their own (the roof names the kernel that set it)")
            kinds[kind].update(kernels)
    return readers, mixers, copiers


def measure(device: torch.device, timer, nbytes: int, budget: TimingBudget, near_bytes: int = 0) -> Roof:
    """The roof from buffers of ``nbytes``; with ``near_bytes``, the read, mix and copy kernels
    timed again on buffers of that size (Roof.near)."""
    n = nbytes // 4
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    every: dict = {}
    read, mix, copy = _kinds(device, timer, budget, src, dst, every)
    write = _gbps(timer, budget, lambda: dst.fill_(1.0), n * 4)
    every["fill_"] = list(write)
    near = {}
    if near_bytes and near_bytes < nbytes:
        m = near_bytes // 4
        kinds = _kinds(device, timer, budget, src[:m], dst[:m], {})
        near = {"bytes": m * 4, **{kind: [g, name] for kind, (g, _, name) in zip(("read", "mix", "copy"), kinds)}}
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    label = "cuda_events" if device.type == "cuda" else "wall"
    return Roof(name, "", copy[0], read[0], write[0], n * 4, time.time(), label, read_kernel=read[2],
                copy_kernel=copy[2], mix_gbps=mix[0], mix_kernel=mix[2], kernels=every, copy_sustained_gbps=copy[1],
                read_sustained_gbps=read[1], write_sustained_gbps=write[1], mix_sustained_gbps=mix[1], near=near)


def _gbps(timer, budget: TimingBudget, launch, moved) -> tuple[float, float | None]:
    """(GB/s, sustained GB/s or None) of one roof kernel."""
    t = timer.time(launch, budget, moved)
    sustained = t.sustained_us
    return moved / (t.median_us * 1e-6) / 1e9, sustained and moved / (sustained * 1e-6) / 1e9


def _kinds(device, timer, budget: TimingBudget, src: torch.Tensor, dst: torch.Tensor, every: dict) -> tuple:
    """The fastest read, mix and copy over these buffers (fastest: GB/s, sustained, name)."""
    n = src.numel()
    scalar = torch.empty((), dtype=torch.float32, device=device)
    readers = {"torch.sum": lambda: torch.sum(src, dim=0, out=scalar),
               "torch.amax": lambda: torch.amax(src, dim=0, out=scalar)}
    quarter = n // 4   # mix: three quarters of src read, the last quarter of dst written
    a, b, c, d = src[:quarter], src[quarter:2 * quarter], src[2 * quarter:3 * quarter], dst[3 * quarter:4 * quarter]
    mixers = {"torch.addcmul": lambda: torch.addcmul(a, b, c, out=d)}
    copiers = {"copy_": lambda: dst.copy_(src)}
    if device.type == "cuda":
        for kind, extra in zip((readers, mixers, copiers), framework_kernels(registry.frameworks(), src, dst, every)):
            kind.update(extra)
    return (fastest(readers, lambda launch: _gbps(timer, budget, launch, n * 4), every),
            fastest(mixers, lambda launch: _gbps(timer, budget, launch, 4 * quarter * 4), every),
            fastest(copiers, lambda launch: _gbps(timer, budget, launch, 2 * n * 4), every))


def cache_dir() -> Path:
    return Path(os.environ.get("HARNESS_CACHE", Path.home() / ".cache" / "kernel-harness"))


def cache_unwritable() -> str | None:
    """Why nothing can be kept in ``cache_dir()`` (a file there, no permission), or None.
    The roof and the builds treat an unwritable cache as empty, so without this a broken
    HARNESS_CACHE only shows as every run measuring and building everything again."""
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test.{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        return f"{folder} cannot be written ({type(e).__name__}: {e.strerror or e})"
    return None


def near_bytes(device: torch.device) -> int:
    """The buffers the roof's kernels are timed on again, on a GPU: the L2's size (whole 64 KiB,
    which every roof kernel's tile divides), so that a copy moves twice the L2."""
    if device.type != "cuda":
        return 0
    return torch.cuda.get_device_properties(device).L2_cache_size // (64 << 10) * (64 << 10)


def get(device: torch.device, timer, provenance: dict, nbytes: int, max_age_s: float,
        use_cache: bool, budget: TimingBudget) -> Roof:
    key = device_key(device, provenance)
    path = cache_dir() / "roofs.json"
    cached = {}
    if use_cache and path.exists():
        try:
            cached = json.loads(path.read_text())
        except (OSError, ValueError):
            cached = {}
        hit = cached.get(key)
        # a roof kept before sustained timing and the streaming kernels existed lacks them:
        # measured again on a GPU
        complete = hit and (device.type != "cuda" or (hit.get("copy_sustained_gbps") is not None
                                                      and bool(hit.get("read_kernel"))
                                                      and bool(hit.get("mix_kernel"))
                                                      and bool(hit.get("copy_kernel"))
                                                      and bool(hit.get("near"))))
        if complete and time.time() - hit["measured_at"] <= max_age_s and hit["measured_bytes"] == nbytes:
            fields = {f.name for f in dataclasses.fields(Roof)}
            return Roof(**{**{k: v for k, v in hit.items() if k in fields}, "source": "cache"})
    progress.phase(f"measuring the roof ({nbytes >> 20} MiB per kernel"
                   + (f"; kept {max_age_s:.0f} s)" if use_cache else ")"))
    roof = measure(device, timer, nbytes, budget, near_bytes(device))
    roof.device_key = key
    if use_cache:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            cached[key] = asdict(roof)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")   # concurrent writers each rename a whole file
            tmp.write_text(json.dumps(cached, indent=1))
            tmp.replace(path)
        except OSError:
            pass   # a read-only home only costs a re-measurement next time
    return roof
