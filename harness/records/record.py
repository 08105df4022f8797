"""One record per case: what ran, how it did, and where the numbers came from.

Every case yields exactly one record, also when it is skipped, fails, runs out of memory,
raises or crashes its worker. Records are plain JSON (one line each in results.jsonl).
"""
from __future__ import annotations

import datetime as _dt
import math
import uuid
from dataclasses import asdict, dataclass, field, fields
from typing import Any

# invalid: the impl broke the launcher's contract (harness.measure.integrity) or its time is
# physically impossible; its times, if any, are kept, but no bandwidth is claimed.
STATUSES = ("ok", "fail", "invalid", "skipped", "error", "oom", "crash", "timeout")
# The reasons of the cases an interrupt (SIGINT) left unmeasured: cut while it ran, or not started.
INTERRUPTED = "interrupted (SIGINT) while this case ran"
NOT_RUN = "the run was interrupted (SIGINT) before this case"


@dataclass
class Record:
    op: str
    impl: str
    variant: str
    dtype: str
    shape: list[int]
    # the impl, then [value] for each setting of its framework that makes a series of its own
    # and is not at its default (registry.Framework.series_settings): ``impl[value]``
    series: str = ""
    device: str = ""
    status: str = "error"            # one of STATUSES
    reason: str = ""
    negative_control: bool = False   # a variant expected to fail (it exists to show the check works)
    role: str = ""                   # ours | peer (registry.Framework.role); a line without one: read with a warning
    # bytes and time
    bytes: int = 0                   # compulsory bytes: read + written
    bytes_read: int = 0
    bytes_written: int = 0
    timer: str = ""                  # cuda_events | wall | wall_interpreter
    median_us: float | None = None
    p10_us: float | None = None
    p90_us: float | None = None
    samples: int = 0
    spread: float | None = None
    graph_us: float | None = None    # per launch, back-to-back in one CUDA graph (small cases)
    graph_note: str = ""
    late_samples: int = 0            # timing samples left out: the GPU may have waited on the host
    spin_us: float | None = None     # the GPU's lead over the host per burst of timing samples
    median_lo_us: float | None = None   # the median's 95% interval over this run's samples
    median_hi_us: float | None = None
    gbps: float | None = None        # bytes / median time, 10^9 bytes/s
    roof_gbps: float | None = None   # this op's roof, measured on this device
    roof_kind: str = ""
    roof_source: str = ""
    pct_roof: float | None = None
    peak_gbps: float | None = None   # datasheet
    pct_peak: float | None = None
    # sustained (large cases): launches back to back, each charged the L2 write-back the one
    # before it left, against the roof's kernels timed the same way (harness.measure.timing)
    sustained_us: float | None = None
    sustained_note: str = ""
    sustained_gbps: float | None = None
    sustained_roof_gbps: float | None = None
    pct_roof_sustained: float | None = None
    # run in several fresh worker processes (processes > 1): each one's median, the
    # record's median their median, its interval their range (harness.run.processes)
    processes: int = 1
    process_medians_us: list[float] = field(default_factory=list)
    # correctness
    passed: bool | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    tol_used: float | None = None
    checks: list[dict] = field(default_factory=list)
    # determinism and batch invariance
    determinism_runs: int = 0
    n_distinct: int | None = None
    max_ulp_spread: int | None = None
    deterministic: bool | None = None
    batch_invariant: bool | None = None
    batch_sizes: list[int] = field(default_factory=list)
    batch_note: str = ""
    # the launcher's contract (harness.measure.integrity): each violation in words; status invalid if any
    violations: list[str] = field(default_factory=list)
    stream_note: str = ""            # what the stream check saw (or why it did not run)
    # NVML clocks at the case's start and after its timing (provenance.clock_check)
    clocks: dict[str, Any] = field(default_factory=dict)
    clock_note: str = ""             # set when the case was timed far below the GPU's normal clocks
    # identity and provenance
    seed: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    # the launch config an impl ran, and its ``source``: the GPU's config table (file, blob, entry)
    # or the framework's rule (harness.launch.configs)
    impl_config: dict[str, Any] = field(default_factory=dict)
    # where the case's wall time went, by phase (harness.run.runner): checks (the binds, builds
    # included), contract, repeatability, timing, after (the trace and the final checks)
    seconds: dict[str, float] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    traceback: str = ""
    invocation_id: str = ""
    plan_cases: int = 0              # the cases its invocation planned (0: not said): those a killed run left no record of
    record_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    timestamp: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat())

    def __post_init__(self):
        self.series = self.series or self.impl   # none given: the impl's default series

    def derive_rates(self) -> None:
        """GB/s and the % of roof and peak, from the times and the roofs this record holds
        (the runner sets those; a merge of process runs sets new times). An interpreter's
        wall-clock time claims no bandwidth."""
        if self.timer == "wall_interpreter":
            return
        self.gbps = self.bytes / (self.median_us * 1e-6) / 1e9 if self.median_us else None
        self.pct_roof = 100 * self.gbps / self.roof_gbps if self.gbps and self.roof_gbps else None
        self.pct_peak = 100 * self.gbps / self.peak_gbps if self.gbps and self.peak_gbps else None
        self.sustained_gbps = self.bytes / (self.sustained_us * 1e-6) / 1e9 if self.sustained_us else None
        self.pct_roof_sustained = (100 * self.sustained_gbps / self.sustained_roof_gbps
                                   if self.sustained_gbps and self.sustained_roof_gbps else None)

    def clear_rates(self) -> None:
        """No bandwidth claimed (an invalid case): the rates go, the times stay as evidence."""
        for name in ("gbps", "pct_roof", "pct_peak", "sustained_gbps", "pct_roof_sustained"):
            setattr(self, name, None)

    @property
    def shape_str(self) -> str:
        return "x".join(str(n) for n in self.shape)

    @property
    def impl_label(self) -> str:
        return impl_label(self.impl, self.variant)

    @property
    def case_label(self) -> str:
        """The case in one line of a log: ``rmsnorm triton bfloat16 16x4096``."""
        return case_label(self.op, self.impl, self.variant, self.dtype, self.shape)

    @property
    def series_key(self) -> tuple[str, str, str, str]:
        return (self.op, self.series, self.variant, self.dtype)

    @property
    def case_key(self) -> tuple[str, str, str, str, str]:
        """A case: op, impl (with its series settings), variant, dtype and shape. The GPU is
        not in it: group records by GPU first where several GPUs meet."""
        return (*self.series_key, self.shape_str)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Record":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def cache_bytes(prov: dict) -> int | None:
    """The cache a case's data can sit in between launches: the GPU's L2, or the CPU's last
    level (read from a record's provenance; here, so that the tools reading results files
    need no torch: devtools/first-run runs under a bare python3)."""
    return prov.get("gpu_l2_bytes") or prov.get("cpu_cache_bytes")


def measured_something(r: Record) -> bool:
    """Whether a record says something of its impl: not a case skipped (the impl unusable
    there, or the run stopped before it) nor one an interrupt cut while it ran."""
    return r.status != "skipped" and r.reason != INTERRUPTED


def latest(records: list[Record]) -> list[Record]:
    """The latest record (by its timestamp) of each case, in the order the cases first came:
    a case measured again replaces its earlier record, whatever the order of the files."""
    found: dict[tuple, Record] = {}
    for r in records:
        key = r.case_key
        if key not in found or (r.timestamp or "") >= (found[key].timestamp or ""):
            found[key] = r
    return list(found.values())


def case_label(op: str, impl: str, variant: str, dtype: str, shape) -> str:
    """A case as a log line names it, before it runs (a CaseSpec) or after (a Record)."""
    return f"{op} {impl_label(impl, variant)} {dtype} {'x'.join(str(n) for n in shape)}"


def by_size(shape) -> tuple:
    """A shape's place among others: its number of elements, then its dims as numbers
    (16x4096 before 16384x8192; of 8192x16384 and 32768x4096, fewer rows first)."""
    return (math.prod(shape), list(shape))


def impl_label(impl: str, variant: str) -> str:
    """The impl as tables and logs name it: ``triton/two_pass``, or ``eager`` (no variant)."""
    return impl if variant == "-" else f"{impl}/{variant}"

