"""Run one case: bind, check, time, and fill in its record. Never raises.

The order is llm.c's: validate, then time. Every input set (three or more fresh seeds of
random inputs, then each adversarial set) is bound, the output poisoned, launched and
compared against float64. Then determinism and batch invariance on the first seed's
inputs, then timing of that same launcher.
"""
from __future__ import annotations

import secrets
import time
import traceback
import warnings
from dataclasses import dataclass, field

import torch

from harness.measure import checks, integrity, roofline

from harness import registry
from harness.run.device import case_stream, on_stream, synchronize
from harness.measure.provenance import clock_check, collect, refresh_clocks
from harness.records.record import Record
from harness.measure.timing import TimingBudget, WallTimer, timer_for

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# An interpreter (Framework.interpreted) runs a kernel's blocks or programs one after another,
# so launches on the same inputs differ only where the host's code does: two show that, and
# the GPU's repeated launches show the rest (a launch of Numba's simulator takes up to seconds).
INTERPRETED_DETERMINISM_RUNS = 2


@dataclass(frozen=True)
class CaseSpec:
    """A case as the plan hands it to a runner (plain data: it crosses process boundaries)."""

    op: str
    impl: str
    variant: str
    dtype: str
    shape: tuple[int, ...]
    params: dict = field(default_factory=dict, hash=False)
    skip_reason: str | None = None


@dataclass(frozen=True)
class Settings:
    seeds: int = 3
    base_seed: int = 0
    determinism_runs: int = 10
    batch_invariance: bool = True
    budget: TimingBudget = TimingBudget()
    roof_bytes: int = 1 << 30
    roof_cache: bool = True
    roof_max_age_s: float = 86400.0
    invocation_id: str = ""
    # The launcher's contract (harness.measure.integrity) on every case. The sweeps always check it;
    # a test of numerics alone, over many shapes of impls already checked, may not.
    contract: bool = True
    # Each framework's settings, the run's ``frameworks.<name>.*`` as plain values: every
    # process that runs cases hands them to its frameworks (Framework.configure) as it starts.
    frameworks: dict = field(default_factory=dict, hash=False)


def base_record(spec: CaseSpec, device, settings: Settings, provenance: dict) -> Record:
    """The record of a case before it runs: identity, bytes, and 'skipped' if it will not run."""
    rec = Record(op=spec.op, impl=spec.impl, variant=spec.variant, dtype=spec.dtype,
                 shape=list(spec.shape), device=str(device), params=dict(spec.params),
                 seed=settings.base_seed, invocation_id=settings.invocation_id,
                 provenance=provenance)
    op = registry.ops()[spec.op]
    rec.negative_control = spec.variant in op.negative_controls
    rec.role = registry.role_of(spec.impl)
    rec.series = registry.series_of(spec.impl, settings.frameworks.get(spec.impl) or {})
    rec.bytes_read, rec.bytes_written = op(**spec.params).bytes_moved(spec.shape, DTYPES[spec.dtype])
    rec.bytes = rec.bytes_read + rec.bytes_written
    if spec.skip_reason:
        rec.status, rec.reason = "skipped", spec.skip_reason
    return rec


class _Phases:
    """Each phase's wall seconds into ``seconds``, from the end of the one before (the first
    from the case's start here): where a case's time goes, which the records' timestamps
    alone do not say."""

    def __init__(self, seconds: dict[str, float]):
        self.seconds, self.mark = seconds, time.perf_counter()

    def done(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self.mark, 4)
        self.mark = now


def _invalid(rec: Record) -> None:
    """An invalid case: its violations, then what its checks found, if anything."""
    checked = rec.reason if rec.status != "invalid" and rec.passed is False else ""
    rec.status = "invalid"
    rec.reason = "; ".join(rec.violations) + (f"; the checks: {checked}" if checked else "")


def _failed(rec: Record, result: checks.CheckResult) -> None:
    """A check that failed after the case's checks had passed (inputs refilled in place):
    the case fails, that check beside the others, its detail the reason."""
    rec.checks.append(result.as_dict())
    rec.passed = False
    for name in ("max_abs_err", "max_rel_err", "tol_used"):
        setattr(rec, name, max((v for v in (getattr(rec, name), getattr(result, name)) if v is not None),
                               default=None))
    label = "negative control failed as expected: " if rec.negative_control else ""
    ran = sum(1 for c in rec.checks if c["passed"] is not None)
    kept = "" if rec.reason.startswith("negative control PASSED") else rec.reason   # input sets left out
    rec.reason = "; ".join(x for x in (f"{label}1 of {ran} checks failed: {result.case} (seed {result.seed}): "
                                       f"{result.detail}", kept) if x)


# A CPU case runs on one PyTorch thread: with its default (a thread per core) its threads
# fight any other process for the cores, and a small case's time grows a thousandfold
# (eager RMSNorm fp32 4x4096 on 2 cores beside two busy processes: 14,170 us on two threads,
# 12.5 us on one; 10.8 us on one alone), while its spread can stay small.
CPU_THREADS = 1
# numpy's floating-point warnings ("invalid value encountered in subtract") from the
# interpreters that run GPU kernels on a CPU: the IEEE results a GPU gives silently (softmax's
# all -inf rows), which the checks judge; printed, they read as errors.
FLOAT_WARNINGS = r"(invalid value|divide by zero|overflow|underflow) encountered"


def settle_cpu(device: torch.device) -> None:
    """A CPU case process as the rules above set it: CPU_THREADS, FLOAT_WARNINGS quiet."""
    if device.type == "cuda":
        return
    torch.set_num_threads(CPU_THREADS)
    warnings.filterwarnings("ignore", FLOAT_WARNINGS, RuntimeWarning)


class Runner:
    def __init__(self, device: torch.device, settings: Settings):
        self.device = device
        self.settings = settings
        settle_cpu(device)
        self.provenance = collect(device)
        if device.type != "cuda":
            self.provenance["cpu_threads"] = torch.get_num_threads()
        self.timer = timer_for(device)
        self.interp_timer = WallTimer(interpreter=True)
        self.frameworks = registry.frameworks()
        registry.configure(settings.frameworks)
        self.ops = registry.ops()
        for fw in self.frameworks.values():
            fw.prepare(device)
        self.peak = roofline.datasheet_gbps(self.provenance.get("gpu_name") or "")
        self.roof, self.roof_error = None, ""
        try:
            nbytes = settings.roof_bytes if device.type == "cuda" else settings.roof_bytes // 4
            self.roof = roofline.get(device, self.timer, self.provenance, nbytes,
                                     settings.roof_max_age_s, settings.roof_cache, settings.budget)
        except Exception as e:  # noqa: BLE001 - no roof means no %-of-roof, not no results
            self.roof_error = f"roof measurement failed: {type(e).__name__}: {e}"
        self._op_instances: dict = {}
        # Cases run on a stream of their own, not the legacy default stream: work a
        # framework queues on the legacy stream (CuPy's and Numba's default) is then
        # unordered with the timed stream, and the stream check can tell it apart.
        self.stream = case_stream(device)

    def op(self, name: str, params: dict):
        key = (name, tuple(sorted(params.items())))
        if key not in self._op_instances:
            self._op_instances[key] = self.ops[name](**params)
        return self._op_instances[key]

    def run(self, spec: CaseSpec) -> Record:
        s = self.settings
        rec = base_record(spec, self.device, s, refresh_clocks(self.provenance, self.device))
        if rec.status == "skipped":
            return rec
        try:
            with on_stream(self.stream):
                self._run(rec, spec)
        except registry.Unavailable as e:   # its framework cannot run here after all (a failed build)
            rec.status, rec.reason = "skipped", str(e)
        except torch.cuda.OutOfMemoryError as e:
            rec.status, rec.reason = "oom", f"out of memory: {str(e).splitlines()[0]}"
        except Exception as e:  # noqa: BLE001 - one failing impl never stops the others
            rec.status, rec.reason = "error", f"{type(e).__name__}: {str(e)[:2000]}"
            rec.traceback = traceback.format_exc(limit=20)
        finally:
            if self.device.type == "cuda":
                try:
                    torch.cuda.synchronize(self.device)
                    torch.cuda.empty_cache()
                except Exception as e:  # noqa: BLE001 - a broken context: say so
                    if rec.status not in ("error", "oom"):
                        rec.status, rec.reason = "error", f"{type(e).__name__}: {e}"
        return rec

    def _run(self, rec: Record, spec: CaseSpec) -> None:
        phase = _Phases(rec.seconds)
        op = self.op(spec.op, spec.params)
        dtype = DTYPES[spec.dtype]
        impl = self._impl(spec)
        launch, inputs, out, checked = self._check(rec, op, impl, spec.shape, dtype)
        rec.impl_config = {**self.frameworks[spec.impl].settings(), **getattr(launch, "config", {})}
        phase.done("checks")
        trace_after = self.settings.contract and self._contract(rec, op, launch, inputs, out, checked, spec.shape,
                                                                dtype)
        del checked
        phase.done("contract")
        if rec.violations:
            _invalid(rec)
            return   # a launcher that breaks the contract is not timed: its time would not be its work's
        before = integrity.snapshot(inputs)
        interpreted = self.frameworks[spec.impl].interpreted(self.device)
        self._repeatability(rec, op, impl, launch, inputs, out, interpreted)
        phase.done("repeatability")
        self._time(rec, launch, interpreted)
        phase.done("timing")
        rec.clocks, rec.clock_note = clock_check(self.provenance, self.device, rec.provenance)
        stream = None
        if trace_after:   # no graph could be captured: the trace, after the timing it would slow
            stream, rec.stream_note = integrity.stream_trace(launch, self.device)
        after = integrity.written_inputs(inputs, before, "the determinism, batch and timed launches")
        outside = integrity.written_outside(out, "the determinism, batch and timed launches")
        late, wrong = self._refilled_after_timing(rec, op, launch, inputs, out, spec.shape, dtype)
        if wrong:
            _failed(rec, wrong)
        limit = integrity.impossible(rec.gbps, rec.bytes, self.provenance.get("gpu_l2_bytes"),
                                     rec.peak_gbps, rec.roof_gbps)
        rec.violations = [v for v in (stream, after, outside, late, limit) if v]
        phase.done("after")
        if rec.violations:
            _invalid(rec)
            rec.clear_rates()
            return
        rec.status = "ok" if rec.passed else "fail"

    def _contract(self, rec: Record, op, launch, inputs, out, checked, shape, dtype) -> bool:
        """The launcher's contract (harness.measure.integrity) before timing: recompute, bind, one
        stream. True when the stream check needs a CUPTI trace after the timing."""
        sync = lambda: synchronize(self.device)  # noqa: E731
        if self.device.type != "cuda":   # a CPU's one stream, its thread: first, as work left running skews the rest
            late = integrity.work_after_return(launch, out)
            if late:
                rec.violations.append(late)
                return False
        if rec.passed:   # a launcher already wrong on its checked inputs is a failure, not a cheat
            stale, result = integrity.recompute(launch, out, inputs, sync, checked)
            # The refill's seed is drawn afresh (it is in the reason when it fails), not derived
            # from the base seed: from the op's input maker and a predictable seed, bind could
            # compute the refill's answer too, and read an element at launch to pick it.
            if not stale:
                stale, wrong = integrity.rebind(op, launch, inputs, out, result, shape, dtype, self.device,
                                                secrets.randbelow(1 << 31), sync)
                if wrong:
                    _failed(rec, wrong)
            if stale:
                rec.violations.append(stale)
                return False
        stream, rec.stream_note, trace = integrity.stream_check(launch, out, self.device)
        if stream and trace:   # off the stream: name where it ran (this case is not timed)
            named, rec.stream_note = integrity.stream_trace(launch, self.device)
            stream = named or stream
        if stream:
            rec.violations.append(stream)
        return trace and not stream

    def _refilled_after_timing(self, rec: Record, op, launch, inputs, out, shape, dtype
                               ) -> tuple[str | None, checks.CheckResult | None]:
        """The refill check again, on the launcher as timing left it: one that stops working
        once it has been called often enough to be timed (a count no check before timing
        reaches) gives its last answer here; the physical limit sees that only beyond the L2.
        The first input alone: any refill shows a launcher that stopped working, and each
        refill is a checked launch and a float64 reference (an interpreter's launch on a CPU
        takes up to seconds; the chain's four inputs would be four)."""
        if not (self.settings.contract and rec.passed):
            return None, None
        return integrity.rebind(op, launch, inputs, out, out, shape, dtype, self.device, secrets.randbelow(1 << 31),
                                lambda: synchronize(self.device), when="after the timed launches", first_only=True)

    def _impl(self, spec: CaseSpec) -> registry.Impl:
        key = (spec.op, spec.impl, spec.variant)
        if key not in registry.registered():
            _, failures = registry.load_impls(spec.op, [spec.impl])
            if failures:
                raise RuntimeError(failures[0].reason)
        return registry.registered()[key]

    def _check(self, rec: Record, op, impl, shape, dtype):
        s = self.settings
        results: list[checks.CheckResult] = []
        left_out: list[dict] = []   # input sets too large for the framework here (registry.TooLarge)
        too_large = ""              # the first one's reason
        kept = None
        cases = [("random", s.base_seed + i) for i in range(s.seeds)]
        cases += [(name, s.base_seed + 1000 + i) for i, name in enumerate(op.adversarial)]
        for case, seed in cases:
            inputs = op.inputs(shape, dtype, self.device, seed, case)
            out = integrity.guarded(op.make_output(inputs))
            before = integrity.snapshot(inputs)
            try:
                launch = impl.bind(**inputs, out=out)
            except registry.TooLarge as e:
                too_large = too_large or str(e)
                left_out.append({"case": case, "seed": seed, "passed": None, "detail": f"not run here: {e}"})
                continue
            result, got = checks.checked_launch(op, launch, inputs, out, dtype, case, seed,
                                                lambda: synchronize(self.device))
            results.append(result)
            when = f"bind and the checked launch ({case}, seed {seed})"
            for written in (integrity.written_inputs(inputs, before, when), integrity.written_outside(out, when)):
                if written and not any(v.split(":")[0] == written.split(":")[0] for v in rec.violations):
                    rec.violations.append(written)   # the first set that shows it
            if kept is None:
                kept = (launch, inputs, out, got)   # got: the checked launch's result, recompute's first
            del got
        if kept is None:
            raise registry.Unavailable(f"no input set fits here: {too_large}")
        rec.checks = [r.as_dict() for r in results] + left_out
        rec.passed = all(r.passed for r in results)
        errs = [r for r in results if r.max_abs_err is not None]
        rec.max_abs_err = max((r.max_abs_err for r in errs), default=None)
        rec.max_rel_err = max((r.max_rel_err for r in errs), default=None)
        rec.tol_used = max((r.tol_used for r in errs if r.tol_used is not None), default=None)
        failed = [r for r in results if not r.passed]
        if failed:
            what = "; ".join(f"{r.case} (seed {r.seed}): {r.detail}" for r in failed[:3])
            more = f" (+{len(failed) - 3} more)" if len(failed) > 3 else ""
            label = "negative control failed as expected: " if rec.negative_control else ""
            rec.reason = f"{label}{len(failed)} of {len(results)} checks failed: {what}{more}"
        elif rec.negative_control:
            rec.reason = "negative control PASSED every check: its adversarial inputs are too weak"
        if left_out:   # checked on a device that takes them
            sets = ", ".join(f"{c['case']} (seed {c['seed']})" for c in left_out)
            rec.reason = "; ".join(x for x in (rec.reason, f"input sets not run here: {sets}: {too_large}") if x)
        return kept

    def _repeatability(self, rec: Record, op, impl, launch, inputs, out, interpreted: bool):
        s = self.settings
        runs = min(s.determinism_runs, INTERPRETED_DETERMINISM_RUNS) if interpreted else s.determinism_runs
        det = checks.determinism(launch, out, runs)
        synchronize(self.device)
        rec.determinism_runs, rec.n_distinct = det.runs, det.n_distinct
        rec.max_ulp_spread, rec.deterministic = det.max_ulp_spread, det.deterministic
        if op.row_op and s.batch_invariance:
            rows = out.shape[0]
            sizes = checks.batch_sizes(rows)
            if not sizes:
                rec.batch_note = "a single row: nothing to vary"
                return
            full = det.first
            ok, note = checks.batch_invariance(op, impl.bind, inputs, out, full, sizes)
            synchronize(self.device)
            rec.batch_invariant, rec.batch_sizes, rec.batch_note = ok, sizes, note

    def _time(self, rec: Record, launch, interpreted: bool):
        timer = self.interp_timer if interpreted else self.timer
        t = timer.time(launch, self.settings.budget, rec.bytes)
        rec.timer, rec.samples, rec.spread = t.timer, t.samples, t.spread
        rec.median_us, rec.p10_us, rec.p90_us = t.median_us, t.p10_us, t.p90_us
        rec.graph_us, rec.graph_note = t.graph_us, t.graph_note
        rec.late_samples, rec.spin_us = t.late_samples, t.spin_us
        rec.median_lo_us, rec.median_hi_us = t.median_lo_us, t.median_hi_us
        rec.sustained_us, rec.sustained_note = t.sustained_us, t.sustained_note
        if interpreted:
            rec.graph_note = "interpreter: wall-clock time of the interpreter, no bandwidth claimed"
            return
        if self.roof is not None:
            rec.roof_gbps, rec.roof_kind = self.roof.for_mix(rec.bytes_read, rec.bytes_written)
            if rec.sustained_us:
                rec.sustained_roof_gbps, _ = self.roof.for_mix(rec.bytes_read, rec.bytes_written, sustained=True)
            rec.roof_source = ", ".join([f"{self.roof.source} {self.roof.timer}",
                                         *self.roof.set_by(rec.bytes_read, rec.bytes_written)])
        else:
            rec.roof_source = self.roof_error
        if self.peak and self.device.type == "cuda":
            rec.peak_gbps = self.peak
        rec.derive_rates()
