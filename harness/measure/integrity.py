"""The launcher's contract, checked: what the harness times is the work, all of it.

The harness times only the launcher, with events on the current stream, after ``bind``.
So these must hold, or a number is a lie however right the output is:

- **inputs read-only**: the inputs are bit-identical after every launch (``written_inputs``);
- **stores within the output**: the guards around each checked output keep their bytes
  (``guarded``, ``written_outside``);
- **recompute**: a second launch on the same inputs writes its output again (a launcher
  that caches its result, by pointer or otherwise, leaves the poison there), and what it
  returns is a plain tensor of its own, not an input (``recompute``);
- **bind prepares, never computes; every launch reads its inputs**: the inputs, refilled in
  place with fresh values after ``bind`` (unseen by torch's version counter) and launched
  onto the output as the last launch left it, give the fresh answer; again after timing (a
  launcher that reads a copy taken at bind, copies an answer computed at bind, keeps a cache,
  skips its work when its output looks written or stops once timed gives the old one, bit for
  bit: ``rebind``; a new answer that is wrong is an accuracy failure, not a breach);
- **one stream**: every GPU activity a launch queues runs on the current PyTorch stream
  (``stream_check``, ``stream_trace``). Work on a private stream or on the legacy default
  stream (CuPy's and Numba's default when no stream is passed) is not between the events:
  measured on the H200, such a launcher timed at 6,437% of the roof. On a CPU, the calling
  thread: no output changes after the launcher returns (``work_after_return``).

Last, the physical limit (``impossible``): a case that moves more than the L2 holds cannot
stream faster than the memory's datasheet peak; one that reads faster did its work outside
the timed stream, or skipped it.

Each check returns None when it holds, else the reason, worded as the violation; the
runner records a case with any violation as ``invalid``, and claims no bandwidth for it.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

import numpy as np
import torch

from harness.measure import checks


def snapshot(inputs: dict) -> dict[str, torch.Tensor]:
    """The inputs' bits, kept to compare against after launches."""
    return {k: v.detach().clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}


def written_inputs(inputs: dict, before: dict[str, torch.Tensor], when: str) -> str | None:
    """None if every input tensor still has the bits it had; else which changed, and how much."""
    changed = []
    for k, old in before.items():
        new = inputs[k]
        diff = checks.raw_bits(new.detach()).reshape(-1) != checks.raw_bits(old).reshape(-1)
        n = int(diff.sum())
        if n:
            changed.append(f"{k} ({n} of {old.numel()} elements)")
    if not changed:
        return None
    return (f"writes its inputs: {', '.join(changed)} changed by {when}; "
            f"inputs are read-only (an impl that needs scratch space allocates it in bind)")


# --- stores outside the output -----------------------------------------------------------
#
# A kernel whose tail loop rounds its bound up, or whose index is off by one, stores past
# its output (or before it) without a fault: the allocation around it has room (a CUDA
# caching allocator's block, another tensor), and what it overwrites is someone else's.
# So the checked outputs sit between two guards of known bytes, checked after the launches.

GUARD_BYTES = 512   # each side: an output 512-byte aligned (the CUDA allocator's) stays so
GUARD_BYTE = 0xA5


def guarded(out: torch.Tensor) -> torch.Tensor:
    """``out`` (contiguous) moved into the middle of an allocation GUARD_BYTES larger each
    side, the guards filled with GUARD_BYTE; any other ``out`` as it is."""
    if not out.is_contiguous() or GUARD_BYTES % out.element_size():
        return out
    pad = GUARD_BYTES // out.element_size()
    buf = torch.empty(out.numel() + 2 * pad, dtype=out.dtype, device=out.device)
    buf.view(torch.uint8).fill_(GUARD_BYTE)
    return buf[pad:pad + out.numel()].view(out.shape)


def written_outside(out: torch.Tensor, when: str) -> str | None:
    """None if the guards around ``out`` (guarded) hold their bytes; else how many changed."""
    whole = torch.empty(0, dtype=torch.uint8, device=out.device).set_(out.untyped_storage())
    start = out.storage_offset() * out.element_size()
    end = start + out.numel() * out.element_size()
    before = int((whole[:start] != GUARD_BYTE).sum())
    after = int((whole[end:] != GUARD_BYTE).sum())
    if not (before or after):
        return None
    return (f"writes outside its output: {after} of the {whole.numel() - end} bytes after its end and "
            f"{before} of the {start} before its start changed by {when}; a kernel stores only "
            f"within its output (what lies beside it belongs to another tensor)")


def recompute(launch, out: torch.Tensor, inputs: dict, sync: Callable[[], None], first: torch.Tensor | None = None
              ) -> tuple[str | None, torch.Tensor]:
    """Launch (or take ``first``, the result of the launcher's last launch on these inputs,
    the checked one), then poison the output (and the tensor the launch returned, if it
    returned one) and launch again on the same inputs: every element must be written again.
    The result must also be a plain tensor of its own: not an input (a copy's ``return x``
    does no work), nor a subclass whose values are computed when read. (violation or None,
    the second launch's result)."""
    if first is None:
        first = checks.result_of(launch, out)
        sync()
    if type(first) is not torch.Tensor:
        return (f"returns a {type(first).__module__}.{type(first).__qualname__}, not a plain torch.Tensor: "
                f"a subclass may compute its values when the checks read them, outside the timed "
                f"launch; a launcher writes out or returns the tensor it computed"), first
    shared = [k for k, v in inputs.items()
              if isinstance(v, torch.Tensor) and _same_storage(v, first)]
    if shared:
        return (f"returns its input {', '.join(shared)} (or a view of it) as its result: a launch "
                f"that hands back what it was given did no work; a launcher writes out or returns "
                f"a tensor it computed"), first
    checks.poison(out)
    checks.poison(first)
    got = checks.result_of(launch, out)
    sync()
    unwritten = int(checks.poisoned(got).sum()) if _same_storage(got, first) or got is out else 0
    if not unwritten:
        return None, got
    return (f"does not recompute: a second launch on the same inputs left {unwritten} of "
            f"{got.numel()} output elements unwritten (as the poison left them); a launcher "
            f"must do the whole work on every call, not return a result it cached"), got


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.device == b.device and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def rebind(op, launch, inputs: dict, out: torch.Tensor, before: torch.Tensor, shape, dtype, device,
           seed: int, sync: Callable[[], None], when: str = "after bind", first_only: bool = False
           ) -> tuple[str | None, checks.CheckResult | None]:
    """Refill the bound input tensors in place, one at a time (``first_only``: the first
    alone), with a fresh random set of the same shape, unseen by torch's version counter, and
    launch onto the output as the last launch left it (the state of a timed launch but for
    the values); after each refill the launcher's output must match the new reference.
    ``before``: the launcher's last result on the inputs as they are. (violation, failed
    check): a wrong output that kept the bits it had before did not compute from the refilled
    values, a violation; one that changed did, and is an accuracy failure on those values,
    the failed check (Liger's RMSNorm, fp16 16384x8192 on an H100: 1 of 134,217,728 elements
    outside the tolerance on a refill, an inexact kernel, not a cheat). The inputs it refilled
    hold their own values again when it returns: the rest of the case runs on the inputs
    its checks saw."""
    fresh = op.inputs(shape, dtype, device, seed, "random")
    before = before.detach().clone()
    names = [k for k, v in inputs.items() if isinstance(v, torch.Tensor)]
    kept: dict[str, torch.Tensor] = {}
    try:
        for k, v in inputs.items():
            if first_only and names and k != names[0]:
                continue
            if not (isinstance(v, torch.Tensor) and isinstance(fresh.get(k), torch.Tensor)
                    and fresh[k].shape == v.shape):
                continue
            kept[k] = v.detach().clone()
            # Through ``.data``, whose version counter is its own: a write through ``v`` bumps
            # v._version, which a launcher can key a cache on (pointer and version) to recompute
            # only when its inputs were refilled.
            v.data.copy_(fresh[k])
            # Not poisoned: the output holds the last answer, as in the timed launches, so that a
            # launcher that skips its work when its output looks written shows here too.
            result, got = checks.checked_launch(op, launch, inputs, out, dtype, f"{k} refilled in place {when}",
                                                seed, sync, poisoned_first=False)
            if result.passed:
                before = got.detach().clone()
                continue
            stale = got.shape == before.shape and torch.equal(checks.raw_bits(got.detach()), checks.raw_bits(before))
            if not stale:
                return None, result
            return (f"does not compute from its inputs as they are: with {k} refilled in place {when} "
                    f"(fresh values, seed {seed}), the launcher's output kept the bits it had before: it reads "
                    f"a copy of {k} taken at bind, or an answer computed at bind, or a result cached by pointer "
                    f"(and version counter), or skips its work when its output already holds an answer; bind "
                    f"may prepare (views, builds, launch configs), never read the values, and every launch "
                    f"reads them"), None
        return None, None
    finally:
        for k, old in kept.items():
            inputs[k].copy_(old)


# --- one stream -------------------------------------------------------------------------
#
# First, a CUDA graph: two launches captured from the current stream and replayed onto a
# poisoned output. Work forked onto another stream and not joined back fails the capture;
# work on an unrelated stream (a private one, the legacy default stream) is not captured,
# so the replay leaves the output unwritten. Measured on the H200 for torch, CuPy and Numba
# launchers on their default, a private and the current stream: every one told apart.
# A capture leaves nothing behind. A CUPTI trace (torch.profiler) does: CUPTI stays attached
# to the process, and an RMSNorm of 16x4096 then replayed 9% slower in a graph (H200). So
# the trace runs only to name the streams of a launcher already found off-stream, or where
# no graph can be captured, after the case's timing; the runner's worker is replaced after it
# (``traced`` in the note).

MARKER = "spin_kernel"   # torch.cuda._sleep's kernel: the marker of the current stream in a trace
ADVICE = ("launch on torch.cuda.current_stream() (CuPy: cupy.cuda.Stream.from_external, "
          "Numba: cuda.external_stream)")
TRACED = "traced"        # a stream note that starts so: CUPTI is attached to this process now


def stream_check(launch, out: torch.Tensor, device: torch.device) -> tuple[str | None, str, bool]:
    """(violation or None, note, whether to trace it with CUPTI to say more).
    Capture two launches as a CUDA graph from the current stream, poison their output,
    replay: every element the launcher wrote before must be written again."""
    if device.type != "cuda":
        return None, "", False
    if torch.cuda.current_stream(device) == torch.cuda.default_stream(device):
        return None, ("stream check not run: the current stream is the legacy default stream, "
                      "so work on it cannot be told apart"), False
    first = checks.result_of(launch, out)
    # The whole device, before reading what the launch wrote: work it left on another stream
    # is not ordered before a copy on this one (the legacy-stream fault's output still held
    # the recompute check's poison, so nothing read as due, and it passed as clean).
    torch.cuda.synchronize(device)
    before = first.detach().clone()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, capture_error_mode="relaxed"):
            for _ in range(2):
                got = checks.result_of(launch, out)
    except Exception as e:  # noqa: BLE001 - the capture's own error is the evidence
        torch.cuda.synchronize(device)
        text = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        if "unjoined" in text:
            return (f"runs work off the current stream: it forks work onto another stream and does not "
                    f"join it back, so the events around the launch do not wait for it (a CUDA graph "
                    f"capture of two launches: {text}); {ADVICE}"), "", False
        return None, f"no CUDA graph could be captured ({text})", True
    # Work on another stream ran eagerly during the capture; it must finish before the
    # poison, or it may write the output after it (measured: RMSNorm bf16 32768x4096 on
    # the legacy stream read as clean without this).
    torch.cuda.synchronize(device)
    checks.poison(got)
    graph.replay()
    torch.cuda.synchronize(device)
    due = ~torch.isnan(before.reshape(-1)) if before.is_floating_point() else None
    unwritten = int((torch.isnan(got.reshape(-1)) & due).sum()) if due is not None and got.shape == before.shape else 0
    del graph
    if unwritten:
        return (f"runs work off the current stream: captured as a CUDA graph from the current stream, "
                f"two launches left {unwritten} of {got.numel()} output elements unwritten: their work ran "
                f"on another stream (a private one, or the legacy default stream, CuPy's and Numba's "
                f"default when given none), which the events around the launch do not time; {ADVICE}"), "", True
    return None, "two launches captured as a CUDA graph from the current stream wrote the whole output", False


# On a CPU the stream is the calling thread: the wall clock around a launch times what ran
# before it returned. Work handed to another thread is not timed (a launcher that started a
# thread and returned timed at its thread's start), so the output must hold, when the
# launcher returns, what it holds once every thread the launch started has ended.
SETTLE_S = 0.002   # and after that, for work queued to threads that were there before (a pool)


def work_after_return(launch, out: torch.Tensor) -> str | None:
    """CPU: launch onto an output of zeros (a finite fill: NaN is the checks' poison, which a
    launcher could look for), then compare the result at the launcher's return with the
    result once its threads have ended, and look for threads the launch started that ran on
    after it returned and then ended (their work was not timed, whether or not it reached
    the output before the look). None when neither shows.

    Both looks at the return are taken while this thread holds the GIL (the threads listed,
    the output copied by numpy through an array that views its bits, made before the launch:
    every torch call releases the GIL), so a thread the launch left cannot run between the
    return and the look. A thread still running a second on (a pool's idle worker) is not
    counted; what it writes in that second is."""
    if not out.is_floating_point():
        return None
    before = set(threading.enumerate())
    out.zero_()
    bits = checks.bits_view(out.detach()).numpy()
    got = checks.result_of(launch, out)
    at_return = bits.tobytes()
    started = [t for t in threading.enumerate() if t not in before]
    if got is not out:   # a tensor of its own: viewed after the return (a torch call)
        bits = checks.bits_view(got.detach()).numpy()
        at_return = bits.tobytes()
    deadline = time.monotonic() + 1.0
    while any(t.is_alive() for t in started) and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(SETTLE_S)
    changed = int((np.frombuffer(bits.tobytes(), bits.dtype) != np.frombuffer(at_return, bits.dtype)).sum())
    ended = sum(not t.is_alive() for t in started)
    if changed:
        return (f"works after the launcher returned: {changed} of {got.numel()} output elements changed "
                f"after it returned (work on another thread), so the wall clock around the launch did "
                f"not time it; a launcher returns when its work is done")
    if ended:
        return (f"works after the launcher returned: {ended} thread(s) it started were still running when "
                f"it returned and ended after, so the wall clock around the launch did not time their "
                f"work; a launcher returns when its work is done (joins the threads it starts)")
    return None


def _gpu_activities(prof, device: torch.device) -> list[tuple[str, int, int]]:
    """(name, stream id, start ns) of every GPU activity (kernels, copies, sets) on ``device``."""
    found = []
    for e in prof.profiler.kineto_results.events():
        if e.device_type() == torch.autograd.DeviceType.CUDA and e.device_index() == (device.index or 0):
            found.append((e.name(), int(e.device_resource_id()), int(e.start_ns())))
    return sorted(found, key=lambda a: a[2])


def stream_trace(launch, device: torch.device) -> tuple[str | None, str]:
    """Trace two launches (CUPTI, through torch.profiler) between markers queued on the
    current stream, and one on the legacy default stream to name it: (violation or None,
    note, which starts with TRACED). Every activity must run on the current stream, and
    each launch must queue some GPU work."""
    try:
        from torch.profiler import ProfilerActivity, profile
    except ImportError as e:
        return None, f"{TRACED}: not run, torch.profiler is unavailable ({e})"
    legacy = torch.cuda.default_stream(device)
    try:
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            with torch.cuda.stream(legacy):
                torch.cuda._sleep(1)
            torch.cuda.synchronize(device)
            for _ in range(2):
                torch.cuda._sleep(1)
                launch()
                torch.cuda.synchronize(device)
            torch.cuda._sleep(1)
            torch.cuda.synchronize(device)
        acts = _gpu_activities(prof, device)
    except Exception as e:  # noqa: BLE001 - a profiler that cannot run is a note, not a verdict
        torch.cuda.synchronize(device)
        return None, f"{TRACED}: not run, {type(e).__name__}: {str(e)[:200]}"
    markers = [i for i, a in enumerate(acts) if MARKER in a[0]]
    if len(markers) != 4:
        return None, f"{TRACED}: {len(markers)} of 4 markers seen (CUPTI missed activities)"
    legacy_id, current_id = acts[markers[0]][1], acts[markers[1]][1]
    per_launch = [acts[markers[1] + 1:markers[2]], acts[markers[2] + 1:markers[3]]]
    # Work on another stream need not wait for the markers: look for it everywhere.
    foreign = [a for i, a in enumerate(acts) if i not in markers and a[1] != current_id]
    if foreign:
        streams = sorted({a[1] for a in foreign})
        where = ", ".join("the legacy default stream" if s == legacy_id else f"stream {s}" for s in streams)
        names = "; ".join(sorted({a[0][:80] for a in foreign})[:3])
        return (f"runs work off the current stream: {len(foreign)} GPU activities of two launches ran on "
                f"{where}, not on the current PyTorch stream (stream {current_id}), so the events around "
                f"the launch do not time them ({names}); {ADVICE}"), f"{TRACED} with CUPTI"
    if not per_launch[1]:
        return ("does not recompute: its second launch queued no GPU work (the first queued "
                f"{len(per_launch[0])} activities); a launcher must do the whole work on every call"), \
            f"{TRACED} with CUPTI"
    n = len(per_launch[1])
    return None, f"{TRACED} with CUPTI: {n} GPU activit{'y' if n == 1 else 'ies'} per launch, all on the current stream"


# --- the physical limit -----------------------------------------------------------------

# Without a datasheet figure for the GPU, no memory system streams this far above its roof
# (the measured roofs sit at 86-92% of the H200's datasheet peak).
ROOF_LIMIT_FACTOR = 1.25


def impossible(gbps: float | None, nbytes: int, l2_bytes: int | None, peak_gbps: float | None,
               roof_gbps: float | None) -> str | None:
    """A case moving more than the L2 holds whose GB/s exceed what the memory can stream."""
    if not gbps or not l2_bytes or nbytes <= l2_bytes:
        return None
    limit, what = ((peak_gbps, "the GPU's datasheet peak") if peak_gbps else
                   (roof_gbps * ROOF_LIMIT_FACTOR if roof_gbps else None,
                    f"{ROOF_LIMIT_FACTOR:g}x the measured roof (no datasheet figure for this GPU)"))
    if not limit or gbps <= limit:
        return None
    return (f"physically impossible: {gbps:.0f} GB/s for {nbytes / 1e6:.0f} MB, more than the L2 "
            f"({l2_bytes / 1e6:.0f} MB) holds, is above {what} ({limit:.0f} GB/s); the work ran outside "
            f"the timed stream or was skipped, so no bandwidth is claimed")
