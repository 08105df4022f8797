"""The harness's timer against nvbench (``cuda-bench``, an optional extra) on the same bound
launchers: what the harness reports beside what NVIDIA's benchmark library measures.

    python -m harness.measure.nvbench op=rmsnorm impl=all dtype=bf16               # cases >= 256 MiB
    python -m harness.measure.nvbench op=all impl=all dtype=[bf16,fp32] min_bytes=0 out=check.jsonl
    python -m harness.measure.nvbench render=check.jsonl                           # the table of saved rows

The cases are the harness's own plan (the same Hydra keys: op, impl, variant, dtype, sweep,
shapes), kept where they move at least ``min_bytes`` (default 256 MiB). In one process, per
case: bind the launcher, check its output once against float64 (a wrong launcher is not
timed), time it with the harness's timer (its median, and the same timer with nvbench's L2
flush: a memset of the L2's size), then with nvbench's cold measurement on nvbench's own
stream. One JSON line per case goes to ``out`` (default nvbench-check.jsonl) and a table to
the console.

Why the two flushes: nvbench flushes L2 by writing it, so the timed kernel first writes back
the flush's dirty lines; the harness flushes by reading, which dirties nothing (timing.py).
On the H200 (RMSNorm bf16 32768x4096, F.rms_norm) that alone is the difference: the harness
154.24 us, the harness with nvbench's flush 157.92, nvbench 157.95.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch

MIN_BYTES = 256 << 20
OWN_KEYS = ("min_bytes", "out", "render")
TAGS = {"nvbench_cold_median_us": "nv/cold/time/gpu/median", "nvbench_cold_mean_us": "nv/cold/time/gpu/mean",
        "nvbench_batch_mean_us": "nv/batch/time/gpu/mean"}
# A case agrees when the harness's timer, flushing as nvbench does, is this close to nvbench.
AGREEMENT = 0.02


def _split(argv: list[str]) -> tuple[dict, list[str]]:
    own, rest = {}, []
    for a in argv:
        key, sep, value = a.partition("=")
        if sep and key in OWN_KEYS:
            own[key] = value
        else:
            rest.append(a)
    return own, rest


def plan_cases(overrides: list[str], device, min_bytes: int, controls: bool = False):
    """The harness's plan for these Hydra overrides, cut to runnable cases of at least
    ``min_bytes``, negative controls left out unless ``controls``: (config, [(case, read,
    written)])."""
    from harness.run import plan as planning
    from harness import registry
    from harness.run.runner import DTYPES
    cfg, plan = planning.from_overrides(overrides, device)
    ops = registry.ops()
    kept = []
    for spec in plan.runnable:
        op = ops[spec.op](**spec.params)
        read, written = op.bytes_moved(spec.shape, DTYPES[spec.dtype])
        if read + written >= min_bytes and (controls or spec.variant not in op.negative_controls):
            kept.append((spec, read, written))
    return cfg, kept


def measure(cfg, cases, device, bench) -> list[dict]:
    """Register one nvbench benchmark per case (nvbench runs once per process), run them,
    and join nvbench's figures to the harness's."""
    from harness.measure import checks
    from harness import registry
    from harness.run.device import case_stream, on_stream, synchronize
    from harness.measure.provenance import collect
    from harness.run.runner import DTYPES
    from harness.measure.timing import CudaTimer, TimingBudget
    from cuda.bench.results import BenchmarkResult

    prov = collect(device)
    keep = {k: prov.get(k) for k in ("gpu_name", "gpu_uuid", "driver", "git_sha", "git_dirty", "versions")}
    budget = TimingBudget(**cfg.sweep.timing)
    timers = {"read": CudaTimer(device), "write": CudaTimer(device, flush="write")}
    stream = case_stream(device)
    rows: dict[str, dict] = {}
    ops = registry.ops()

    def benchmark(name, spec, read, written):
        row = rows[name] = {"op": spec.op, "impl": spec.impl, "variant": spec.variant, "dtype": spec.dtype,
                            "shape": list(spec.shape), "bytes": read + written, "provenance": keep}

        def body(state):
            try:
                op = ops[spec.op](**spec.params)
                impl = registry.registered()[(spec.op, spec.impl, spec.variant)]
                with on_stream(stream):   # the inputs too: made on another stream, a launch could outrun them
                    inputs = op.inputs(spec.shape, DTYPES[spec.dtype], device, 1234)
                    out = op.make_output(inputs)
                    launch = impl.bind(**inputs, out=out)
                    result, _ = checks.checked_launch(op, launch, inputs, out, DTYPES[spec.dtype], "random", 1234,
                                                      lambda: synchronize(device))
                    if not result.passed:
                        row["error"] = f"not timed: wrong result ({result.detail})"
                        state.skip(row["error"][:200])
                        return
                    ours = timers["read"].time(launch, budget, read + written)
                    same_flush = timers["write"].time(launch, budget, read + written)
                row.update(harness_median_us=ours.median_us, harness_sustained_us=ours.sustained_us,
                           harness_samples=ours.samples, harness_nvbench_flush_median_us=same_flush.median_us)
                state.add_global_memory_reads(read)
                state.add_global_memory_writes(written)
                streams: dict[int, torch.cuda.ExternalStream] = {}

                def launcher(nv_launch):
                    ptr = nv_launch.get_stream().addressof()
                    if ptr not in streams:
                        streams[ptr] = torch.cuda.ExternalStream(ptr, device=device)
                    with torch.cuda.stream(streams[ptr]):
                        launch()
                state.exec(launcher)
            except Exception as e:  # noqa: BLE001 - one case's failure is its row's, not the run's
                row["error"] = f"{type(e).__name__}: {str(e)[:500]}"
                state.skip(row["error"][:200])
        body.__name__ = name
        bench.register(body)

    for i, (spec, read, written) in enumerate(cases):
        registry.load_impls(spec.op, [spec.impl])
        benchmark(f"case{i:03d}", spec, read, written)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "nvbench.json")
        bench.run_all_benchmarks(["nvbench", "--json", path, "--quiet", "--devices", str(device.index or 0)])
        results = BenchmarkResult.from_json(path)
    for name, row in rows.items():
        states = results[name] if name in results else None   # a skipped benchmark has no states
        summaries = states[0].summaries if states else {}
        for key, tag in TAGS.items():
            if tag in summaries:
                row[key] = float(summaries[tag].value) * 1e6
        finish(row)
    return list(rows.values())


def finish(row: dict) -> None:
    """The ratios of a joined row, and whether the two timers agree."""
    nv = row.get("nvbench_cold_median_us")
    if not nv or not row.get("harness_median_us"):
        row["agrees"] = None
        return
    row["harness_vs_nvbench_pct"] = 100 * (row["harness_median_us"] / nv - 1)
    row["same_flush_vs_nvbench_pct"] = 100 * (row["harness_nvbench_flush_median_us"] / nv - 1)
    row["agrees"] = abs(row["same_flush_vs_nvbench_pct"]) <= 100 * AGREEMENT


def render(rows: list[dict]) -> str:
    head = (f"{'case':<44} {'MB':>6} {'harness':>9} {'h,nvflush':>9} {'nvbench':>9} {'sust':>9} "
            f"{'h/nv':>7} {'hnv/nv':>7}  agrees")
    lines = [head]
    for r in rows:
        label = f"{r['op']} {r['impl']}{'' if r['variant'] == '-' else '/' + r['variant']} {r['dtype']} " \
                f"{'x'.join(map(str, r['shape']))}"

        def f(key, fmt=".2f"):
            return format(r[key], fmt) if r.get(key) is not None else "-"
        agree = {True: "yes", False: "NO", None: r.get("error", "-")[:60]}[r.get("agrees")]
        lines.append(f"{label:<44} {r['bytes'] / 1e6:>6.0f} {f('harness_median_us'):>9} "
                     f"{f('harness_nvbench_flush_median_us'):>9} {f('nvbench_cold_median_us'):>9} "
                     f"{f('harness_sustained_us'):>9} {f('harness_vs_nvbench_pct', '+.2f'):>7} "
                     f"{f('same_flush_vs_nvbench_pct', '+.2f'):>7}  {agree}")
    judged = [r for r in rows if r.get("agrees") is not None]
    lines.append(f"times in us; h/nv and hnv/nv in %: the harness's median, and the harness with nvbench's "
                 f"write flush, against nvbench's cold median. {sum(r['agrees'] for r in judged)} of "
                 f"{len(judged)} cases agree within {AGREEMENT:.0%} under the same flush.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from harness.run import device as devices
    from harness.errors import ConfigError
    own, overrides = _split(list(sys.argv[1:] if argv is None else argv))
    if "render" in own:
        try:
            rows = [json.loads(line) for line in Path(own["render"]).read_text().splitlines() if line.strip()]
        except (OSError, ValueError) as e:
            print(f"nvbench-check: cannot read {own['render']}: {e}", file=sys.stderr)
            return 2
        print(render(rows))
        return 0
    try:
        min_bytes = int(own.get("min_bytes", MIN_BYTES))
    except ValueError:
        print(f"nvbench-check: min_bytes={own['min_bytes']!r} is not a number of bytes", file=sys.stderr)
        return 2
    try:
        import cuda.bench as bench
    except ImportError as e:
        print(f"nvbench-check: cuda-bench is not installed ({e}); pip install 'cuda-bench[cu13]' "
              f"(or [cu12], matching torch.version.cuda)", file=sys.stderr)
        return 2
    try:
        device = devices.resolve(next((o.split("=", 1)[1] for o in overrides if o.startswith("device=")), "auto"))
        if device.type != "cuda":
            raise ConfigError("nvbench times CUDA kernels: it needs a CUDA GPU, and none is visible here")
        cfg, cases = plan_cases(overrides, device, min_bytes)
    except Exception as e:  # noqa: BLE001 - a bad key or value: say which, no traceback
        print(f"nvbench-check: {type(e).__name__ if not isinstance(e, ConfigError) else 'error'}: {e}",
              file=sys.stderr)
        return 2
    if not cases:
        print(f"nvbench-check: no runnable case moves {min_bytes} bytes or more; lower min_bytes or "
              f"choose larger shapes", file=sys.stderr)
        return 2
    print(f"nvbench-check: {len(cases)} cases of at least {min_bytes / 2**20:.0f} MiB on {device}", flush=True)
    rows = measure(cfg, cases, device, bench)
    out = Path(own.get("out", "nvbench-check.jsonl"))
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(render(rows))
    print(f"rows written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
