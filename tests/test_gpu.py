"""On the GPU machine only (marked gpu): every usable impl of every framework at full size
through the harness's own checks (ours also for the determinism each variant must show and
batch invariance), the roof, the timer against triton's do_bench, and isolation from a lost
CUDA context."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness import registry
from harness.run.runner import CaseSpec, Runner, Settings
from harness.measure.timing import CudaTimer, TimingBudget

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    # Collecting this module imports the Triton impls for the GPU; on a CPU machine they must
    # be imported under the interpreter (by the CPU tests) instead.
    pytest.skip("needs a CUDA GPU (run on the GPU machine)", allow_module_level=True)
ROOT = Path(__file__).resolve().parent.parent
BIG = {1: (1 << 28,), 2: (32768, 4096)}   # 512 MiB (bf16) read per launch


@pytest.fixture(scope="module")
def gpu_runner():
    settings = Settings(seeds=3, base_seed=99, determinism_runs=20, invocation_id="gpu-test",
                        budget=TimingBudget(min_samples=10, max_seconds=0.5, sustained_above_l2=2.0),
                        roof_cache=False)
    return Runner(torch.device("cuda:0"), settings)


def usable_impls() -> list[tuple[str, str, str]]:
    """Every impl of every framework usable on this GPU (the frameworks' own modules, and
    plugins named in HARNESS_PLUGINS), ours first."""
    dev = torch.device("cuda:0")
    found = []
    for name, framework in sorted(registry.frameworks().items(), key=lambda kv: (kv[1].role != registry.OURS, kv[0])):
        if framework.unusable(dev):
            continue
        framework.prepare(dev)
        for op in registry.ops():
            if name not in registry.impl_modules(op):
                continue
            impls, failures = registry.load_impls(op, [name])
            assert not failures, failures
            found += [i.key for i in impls if i.impl == name]
    return found


@pytest.mark.parametrize("key", usable_impls(), ids=lambda k: "-".join(k))
def test_every_impl_at_full_size(gpu_runner, key):
    op, impl, variant = key
    spec = registry.ops()[op]
    rec = gpu_runner.run(CaseSpec(op, impl, variant, "bfloat16", BIG[spec.ndim]))
    if variant in spec.negative_controls:
        assert rec.status == "fail" and any(c["case"] == "large_mean" and not c["passed"] for c in rec.checks)
        return
    assert rec.status == "ok", rec.reason
    assert rec.gbps and rec.pct_roof and rec.timer == "cuda_events"
    assert rec.pct_roof_sustained, rec.sustained_note   # 512 MiB read: ~10x the L2
    if rec.role != registry.OURS:
        return   # a peer's bits are its own business; ours promise determinism and batch invariance
    if (op, variant) == ("sum", "atomic"):
        assert rec.n_distinct > 1, "atomic adds in arrival order should change the bits"
    else:
        assert rec.deterministic, f"{rec.n_distinct} distinct results"
    if spec.row_op:
        assert rec.batch_invariant, rec.batch_note


def test_roof_is_plausible(gpu_runner):
    roof = gpu_runner.roof
    assert roof is not None, gpu_runner.roof_error
    peak = gpu_runner.peak or 1e9
    for gbps in (roof.copy_gbps, roof.read_gbps, roof.write_gbps, roof.copy_sustained_gbps,
                 roof.read_sustained_gbps, roof.write_sustained_gbps):
        assert gbps and 0.3 * peak < gbps <= 1.02 * peak


def test_a_large_case_is_also_timed_sustained():
    """Launches back to back, each paying the L2 write-back the one before it left: a copy
    of 256 MiB into 256 MiB (~10x the L2, so nothing is read warm) takes at least ~97% of
    its single-launch time per launch that way (far less would mean warm reads or
    overlapping samples); a case below the threshold is not timed so."""
    x = torch.randn(1 << 26, device="cuda")
    y = torch.empty_like(x)
    timer = CudaTimer(x.device)
    budget = TimingBudget(min_samples=20, max_seconds=0.5, sustained_above_l2=2.0)
    big = timer.time(lambda: y.copy_(x), budget, 2 * x.nbytes)
    assert big.sustained_us is not None, big.sustained_note
    assert big.sustained_us > 0.97 * big.median_us, (big.sustained_us, big.median_us)
    xs, ys = x[: 1 << 20], y[: 1 << 20]
    small = timer.time(lambda: ys.copy_(xs), budget, 2 * xs.nbytes)
    assert small.sustained_us is None and small.sustained_note == ""


def test_timer_agrees_with_triton_do_bench():
    """Our events-with-cold-L2 median against do_bench's on a 1 GiB copy: within 5%."""
    from triton.testing import do_bench
    x = torch.randn(1 << 28, device="cuda")
    y = torch.empty_like(x)
    ours = CudaTimer(x.device).time(lambda: y.copy_(x), TimingBudget(min_samples=50), 2 * x.nbytes)
    theirs = do_bench(lambda: y.copy_(x), warmup=25, rep=200, return_mode="median") * 1e3
    assert abs(ours.median_us - theirs) / theirs < 0.05, (ours.median_us, theirs)


def test_a_slow_host_launch_is_not_inside_the_time():
    """A launcher that spends 0.3 ms on the host before queueing a ~5 us kernel (a heavy
    Python wrapper): the spin grows past it and the median stays the kernel's, as for the
    same kernel launched bare; a launcher that waits for its kernel has every sample late,
    and the count says so."""
    import time
    x = torch.randn(1 << 16, device="cuda")
    budget = TimingBudget(min_samples=50, max_seconds=0.5)

    def slow():
        time.sleep(300e-6)
        x.mul_(1.0)

    def waits():
        x.mul_(1.0)
        torch.cuda.synchronize()

    timer = CudaTimer(x.device)
    bare = timer.time(lambda: x.mul_(1.0), budget, 2 * x.nbytes)
    assert bare.median_lo_us <= bare.median_us <= bare.median_hi_us <= bare.p90_us   # the median's interval
    padded = timer.time(slow, budget, 2 * x.nbytes)
    assert padded.spin_us >= 4 * 300 and padded.late_samples <= padded.samples // 10
    assert padded.median_us < bare.median_us + 2.0, (padded.median_us, bare.median_us)
    synced = timer.time(waits, budget, 2 * x.nbytes)
    assert synced.late_samples == synced.samples > 0


def test_small_cases_also_get_a_graph_time(gpu_runner):
    rec = gpu_runner.run(CaseSpec("rmsnorm", "eager", "-", "bfloat16", (1, 4096)))
    assert rec.status == "ok" and rec.graph_us is not None and rec.graph_us < rec.median_us + 50


def test_a_lost_cuda_context_costs_only_its_case(tmp_path):
    env = {**os.environ, "HARNESS_PLUGINS": "tests.plugins.broken", "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, "-m", "harness", "op=rmsnorm", "impl=[broken,eager]",
                           "variant=[illegal_address,-]", "shapes=[[4,4096]]", "dtype=bf16", "sweep=smoke",
                           "tracking=none", f"hydra.run.dir={tmp_path}"], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = {r["impl"]: r for r in map(json.loads, (tmp_path / "results.jsonl").read_text().splitlines())}
    assert recs["broken"]["status"] in ("error", "crash"), recs["broken"]
    assert recs["eager"]["status"] == "ok", recs["eager"]["reason"]


def test_a_bound_launch_calls_the_compiled_kernel_on_the_current_stream():
    """After its first launch a Triton launcher skips Triton's dispatch: what the compiled
    kernel's launcher then writes must be what the dispatch wrote, also when a CUDA graph
    captures it on the capture stream and when it runs on a side stream."""
    import triton

    from impls._frameworks.triton.launch import bound_launch
    from impls.scale.triton import _scale
    x = torch.randn(100_003, device="cuda")
    out = torch.empty_like(x)
    want = (3.0 * x.double()).float()
    launch = bound_launch(_scale, (triton.cdiv(x.numel(), 1024),), x, out, 3.0, x.numel(), BLOCK=1024,
                          LOAD="", STORE="", num_warps=4)
    for _ in range(2):   # the dispatch, then the compiled kernel
        out.zero_()
        launch()
        torch.cuda.synchronize()
        assert torch.equal(out, want)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch()
    out.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, want)
    side = torch.cuda.Stream()
    out.zero_()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        launch()
    side.synchronize()
    assert torch.equal(out, want)


def test_harness_tune_writes_the_table_a_run_then_reads(tmp_path, monkeypatch, capsys):
    """harness-tune searches this GPU (today's search) and writes its table; a bind then takes
    the table's entry for its row length, dtype and batch, and the launcher names it."""
    from harness.launch import configs
    from harness.commands import tune
    monkeypatch.setattr(configs, "TABLES", tmp_path)
    monkeypatch.setattr(configs, "_tables", {})
    assert tune.main(["op=rmsnorm", "impl=[triton,cuda]", "dtype=bf16", "shapes=[[64,4096]]", "sweep=smoke",
                      "write=true", f"out={tmp_path / 'tune.jsonl'}"]) == 0
    said = capsys.readouterr().out
    assert "entries measured" in said and "triton rmsnorm tuned 4096 bfloat16: search" in said, said
    table = configs.table_for(torch.cuda.get_device_name())
    assert table is not None and table.path.parent == tmp_path
    configs._tables.clear()
    op = registry.ops()["rmsnorm"]()
    inputs = op.inputs((64, 4096), torch.bfloat16, "cuda", seed=3)
    for impl in ("triton", "cuda"):
        registry.load_impls("rmsnorm", [impl])
        launch = registry.registered()[("rmsnorm", impl, "tuned")].bind(**inputs, out=op.make_output(inputs))
        assert launch.config["source"].startswith(f"table {tmp_path}"), launch.config
        kernel = f"{impl} rmsnorm tuned"
        config, _ = table.lookup(kernel, 4096, "bfloat16", 64)
        assert {k: launch.config[k] for k in config} == config


def test_compiled_code_prints_the_peer_s_triton_kernel():
    proc = subprocess.run([sys.executable, str(ROOT / "devtools" / "compiled-code"), "softmax", "16x4096", "fp32"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    tail = "\n".join(proc.stderr.splitlines()[-15:])
    assert "@triton.jit" in proc.stderr, f"no Triton kernel in the code printed; its end:\n{tail}"
    assert "the launch configs inductor chose:" in proc.stderr and "num_warps" in tail, tail


@pytest.mark.parametrize("warps", [8, 16])
def test_a_persistent_grid_is_what_the_gpu_runs_at_once(warps):
    """A persistent row launch gets as many programs as the driver says its binary runs at
    once per SM, times the SMs (never more warps than an SM holds: 16-warp programs at most
    4 per SM), and writes the bits of one program per tile."""
    from impls._frameworks.triton.launch import sm_count
    from impls._frameworks.triton.occupancy import programs_per_sm
    from impls._frameworks.triton.rows import row_launcher
    from impls.layernorm.triton import _layernorm
    rows, cols = 4096, 4096
    x = torch.randn(rows, cols, device="cuda")
    g, b = torch.randn(cols, device="cuda"), torch.randn(cols, device="cuda")
    ys = [torch.empty_like(x), torch.empty_like(x)]
    cfg = dict(rows=1, num_warps=warps, hints="plain", early=False, ordered=False, loop_block=0)
    fixed = dict(VARIANT=1, BLOCK=cols, ON_CHIP=True, EVEN=True, GROUP=4)
    launches = [row_launcher(_layernorm, {**cfg, "persistent": p, "prefetch": p}, rows, x.device,
                             x, g, b, y, rows, cols, 1e-5, **fixed) for p, y in zip((True, False), ys)]
    for launch in launches:
        launch()
    torch.cuda.synchronize()
    assert torch.equal(ys[0], ys[1])
    per_sm = launches[0].programs // sm_count(x.device)
    assert launches[0].programs == per_sm * sm_count(x.device) and launches[1].programs == rows
    assert 1 <= per_sm <= 64 // warps
    assert programs_per_sm(launches[0].binary) == per_sm   # the binary it ran: its own count


@pytest.mark.parametrize("is_max", [False, True], ids=["sum", "max"])
@pytest.mark.parametrize("atomic", [False, True], ids=["two_pass", "atomic"])
def test_the_one_launch_reduction_holds_over_many_launches(is_max, atomic):
    """The program that takes the last ticket reduces every program's partial
    (impls/sum/triton.py). 1000 launches back to back, no sync between, on an input that
    alternates between a and a + 1 (so that a partial left from the launch before, or not
    yet visible, moves the result), each result copied aside on the GPU in stream order:
    every one agrees with float64, the two-pass ones and the maxes bit for bit with each
    other, and the counter is back at 0 after them."""
    from impls.sum.triton import reduce_1d
    for n in (4097, 1000003, 16777259):   # 2, 245 and 1056 programs on the H200
        gen = torch.Generator(device="cuda").manual_seed(n)
        a = torch.rand(n, device="cuda", generator=gen) + 0.5
        b = a + 1.0
        x, out = torch.empty_like(a), torch.empty((), device="cuda")
        launch = reduce_1d(x, out, is_max=is_max, atomic=atomic)
        results = torch.empty(1000, device="cuda")
        for i in range(len(results)):
            x.copy_(a if i % 2 == 0 else b)
            launch()
            results[i] = out
        torch.cuda.synchronize()
        for got, src in ((results[0::2], a), (results[1::2], b)):
            ref = src.double().max() if is_max else src.double().sum()
            worst = float((got.double() - ref).abs().max())
            # a partial missed or stale moves a sum by ~1/P of it (>= 1e-3 here), far past
            # fp32's rounding of these positive sums (~1e-7-1e-6)
            assert worst <= (0.0 if is_max else 1e-5 * float(ref)), (n, worst, float(ref))
            if is_max or not atomic:
                assert torch.unique(got).numel() == 1, (n, torch.unique(got)[:5])
        assert int(launch.ticket.item()) == 0, n


@pytest.mark.parametrize("is_max", [False, True], ids=["sum", "max"])
@pytest.mark.parametrize("atomic", [False, True], ids=["two_pass", "atomic"])
def test_the_1d_reduction_s_grid_runs_at_once(is_max, atomic):
    """A large sum's or max's grid (PROGRAMS_PER_SM per SM) fits on the GPU in one wave:
    the driver's occupancy of the binary it launched is at least that many per SM (on the
    H200 a two-pass kernel on 40 registers fitted 6 of 8, 1.5-2% slower at 2^28 elements)."""
    from impls._frameworks.triton.launch import sm_count
    from impls._frameworks.triton.occupancy import programs_per_sm
    from impls.sum.triton import PROGRAMS_PER_SM, reduce_1d
    x, out = torch.randn(1 << 24, device="cuda"), torch.empty((), device="cuda")
    launch = reduce_1d(x, out, is_max=is_max, atomic=atomic)
    launch()
    torch.cuda.synchronize()
    assert launch.config["programs"] == PROGRAMS_PER_SM * sm_count(x.device), launch.config
    assert programs_per_sm(launch.binary) >= PROGRAMS_PER_SM, launch.registers


def test_the_planted_faults_are_caught_and_honest_impls_pass_on_the_gpu():
    """Every planted fault (tests/plugins: stream, bind, recompute, input, physical-limit and
    the broken impls) labelled as expected, and no honest impl of RMSNorm flagged, at a size
    ~9x the L2 (the physical limit needs one)."""
    from harness.measure import faultsuite
    rows = faultsuite.run(torch.device("cuda:0"), (32768, 4096), "bfloat16", case_timeout_s=30)
    print(faultsuite.render(rows))
    assert faultsuite.rates(rows) == (1.0, 0.0), faultsuite.render(rows)
    assert sum(r.kind == "honest" for r in rows) >= 3


def _foreign_launchers(x, y):
    """Copies in CuPy and Numba, on their default stream and on the current PyTorch stream."""
    found = {}
    try:
        import cupy
        cx, cy = cupy.from_dlpack(x), cupy.from_dlpack(y)

        def on_current():
            with cupy.cuda.Stream.from_external(torch.cuda.current_stream()):
                cupy.copyto(cy, cx)
        found["cupy"] = (lambda: cupy.copyto(cy, cx), on_current)
    except ImportError:
        pass
    try:
        from numba import cuda as ncuda

        @ncuda.jit
        def copy(a, b):
            i = ncuda.grid(1)
            if i < a.size:
                b[i] = a[i]
        a, b = ncuda.as_cuda_array(x), ncuda.as_cuda_array(y)
        blocks = (x.numel() + 255) // 256
        found["numba"] = (lambda: copy[blocks, 256](a, b),
                          lambda: copy[blocks, 256, ncuda.external_stream(torch.cuda.current_stream().cuda_stream)](a, b))
    except ImportError:
        pass
    return found


@pytest.mark.parametrize("n", [1 << 20, 1 << 28])
def test_the_stream_check_tells_a_frameworks_default_stream_from_the_current_one(n):
    """CuPy and Numba launch on the legacy default stream unless given one: caught, and named;
    the same kernels on the current stream pass. At 1 GiB too, where the work on the other
    stream lasts longer than the capture and could write the output after its poison."""
    from harness.measure import integrity
    from harness.run.device import case_stream, on_stream
    dev = torch.device("cuda:0")
    x = torch.randn(n, device=dev)
    y = torch.empty_like(x)
    launchers = _foreign_launchers(x, y)
    if not launchers:
        pytest.skip("neither cupy nor numba is installed")
    with on_stream(case_stream(dev)):
        for name, (default, current) in launchers.items():
            default()
            current()
            torch.cuda.synchronize()
            bad, _, trace = integrity.stream_check(default, y, dev)
            assert bad and "output elements unwritten" in bad and trace, (name, bad)
            named, note = integrity.stream_trace(default, dev)
            assert named and "legacy default stream" in named and note.startswith(integrity.TRACED), (name, named)
            ok, note, trace = integrity.stream_check(current, y, dev)
            assert ok is None and not trace and "wrote the whole output" in note, (name, ok, note)
            ok, note = integrity.stream_trace(current, dev)
            assert ok is None and "all on the current stream" in note, (name, ok, note)


def _misaligned(t: torch.Tensor, offset: int) -> torch.Tensor:
    """``t``'s values in a view ``offset`` elements past a fresh allocation's start."""
    view = torch.empty(t.numel() + offset, dtype=t.dtype, device=t.device)[offset:]
    view.copy_(t)
    return view


ONE_D_OURS = [k for k in usable_impls() if registry.ops()[k[0]].ndim == 1 and registry.role_of(k[1]) == registry.OURS]


@pytest.mark.parametrize("key", ONE_D_OURS, ids=lambda k: "-".join(k))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_ours_are_right_on_views_at_odd_offsets_and_odd_sizes(key, dtype):
    """x at an odd element offset (no 16-byte alignment), the output aligned or off by the same
    or another offset, at sizes around a pack, a block and a grid, on every input set."""
    from harness.measure.checks import checked_launch
    op_name, impl, variant = key
    op = registry.ops()[op_name]()
    bind = registry.registered()[key].bind
    failures = []
    for n in (1, 7, 9, 4099, 65537, 1000003):
        for case in ("random", *op.adversarial):
            inputs = op.inputs((n,), dtype, "cuda", seed=n, case=case)
            for x_offset, out_offset in ((1, 0), (3, 3), (1, 2)):
                moved = {k: _misaligned(v, x_offset) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
                out = op.make_output(moved)
                if out.dim() == 1:
                    out = _misaligned(out, out_offset)
                result, _ = checked_launch(op, bind(**moved, out=out), moved, out, dtype, case, n, torch.cuda.synchronize)
                if not result.passed:
                    failures.append(f"n={n} {case} offsets x={x_offset} out={out_offset}: {result.detail}")
    assert not failures, "\n".join(failures[:10])


def test_the_cuda_kernels_are_right_at_odd_sizes_on_views_at_odd_offsets():
    """devtools/cuda-sanitize without the sanitizer: every CUDA kernel in each of its launch
    configs, every input set and dtype, small odd sizes, x and the output at odd element
    offsets (rows that start off a 16-byte boundary), against the float64 reference. The
    GPU machine has nvcc: the CUDA kernels must build there (a skip would hide a failed build)."""
    assert registry.frameworks()["cuda"].unusable(torch.device("cuda:0")) is None
    from impls._frameworks.cuda import build
    build.load()   # the plan no longer builds: build here, so that a failed build fails this test
    proc = subprocess.run([sys.executable, str(ROOT / "devtools" / "cuda-sanitize"), "--every-config"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]


EXTENSION_REFUSES = """
import torch
from impls._frameworks.cuda import build
ops = build.load()
x = torch.randn(3, 100, device="cuda", dtype=torch.bfloat16)
for args, says in (((64, 64, 0, 3), "1, 2 or 4"), ((48, 64, 0, 1), "power of two"), ((64, 64, 3, 0), "1, 2, 4 or 8")):
    try:
        ops.rmsnorm(x, x[0], 1e-6, torch.empty_like(x), *args)
    except RuntimeError as e:
        assert says in str(e), str(e)
        print("refused:", str(e).splitlines()[0], flush=True)
    else:
        raise SystemExit(f"config {args} launched")
"""


def test_the_cuda_extension_refuses_a_bad_config_with_a_python_error():
    """A bad config given to the extension's row launcher (a trip, a group, a kept packs count;
    TORCH_CHECK in the host code, the last from inside the dispatch lambdas) reaches Python as a
    RuntimeError naming the limit. In a child process: a crash instead of the error (the longest
    row's refusal ended in a segfault on the H200 twice) fails here without taking the run along."""
    assert registry.frameworks()["cuda"].unusable(torch.device("cuda:0")) is None
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", EXTENSION_REFUSES], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)   # -c: the working directory is on sys.path
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
    assert proc.stdout.count("refused:") == 3, proc.stdout


# --- CuPy: what the harness's own checks do not single out -------------------------------

def test_cupy_views_are_the_tensors_memory_and_launches_follow_the_current_stream():
    """interop.view is the tensor's memory (a write through it shows in torch, also at an odd
    offset and for bf16 as int16), and a CuPy launcher, raw or idiomatic, runs on whatever
    stream is current when it is called: a side stream, and a CUDA graph's capture stream."""
    pytest.importorskip("cupy")
    from impls._frameworks.cupy import interop
    from impls.scale.cupy import bind_idiomatic, bind_tuned
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(100_004, device="cuda").to(dtype)[1:]   # an odd offset: not 16-byte aligned
        v = interop.view(x)
        assert v.data.ptr == x.data_ptr() and v.shape == tuple(x.shape)
        v[:3] = 0
        torch.cuda.synchronize()
        assert torch.equal(x[:3], torch.zeros(3, dtype=dtype, device="cuda"))
    x = torch.randn(100_003, device="cuda")
    out = torch.empty_like(x)
    want = (0.5 * x.double()).float()   # exact: a power of two
    for bind in (bind_tuned, bind_idiomatic):
        launch = bind(x, 0.5, out)
        side = torch.cuda.Stream()
        out.zero_()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            launch()
        side.synchronize()
        assert torch.equal(out, want), bind.__name__
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            launch()
        out.zero_()
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, want), bind.__name__


CUPY_RAW_ROWS = [("rmsnorm", "tuned"), ("softmax", "three_pass"), ("softmax", "online"), ("softmax", "on_chip"),
                 ("layernorm", "welford"), ("layernorm", "two_pass"), ("rmsnorm_silu_mul_add", "fused")]
# CuPy compiles with -ftz=true and no way to turn it off: fp32 results that should be subnormal
# come out 0, which these sets check (the harness's records show them as FAIL, with the reason).
CUPY_FTZ_FAILS = {("softmax", "large_magnitude"), ("rmsnorm_silu_mul_add", "large_gain")}


@pytest.mark.parametrize("key", CUPY_RAW_ROWS, ids="-".join)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_cupy_raw_row_kernels_are_right_in_every_config_on_rows_at_odd_offsets(key, dtype, monkeypatch):
    """The CUDA extension's row kernels as CuPy compiles and launches them, in each config of
    their space (the table not asked: every group, packs kept and trip harness-tune may pick), on rows
    that start on 16-byte boundaries (the whole-row kernels) and off them (x, the weights and
    the output at odd element offsets), at irregular lengths, on every input set."""
    pytest.importorskip("cupy")
    from harness.measure.checks import checked_launch
    from impls._frameworks.cuda import rows as cuda_rows
    op_name, variant = key
    op = registry.ops()[op_name]()
    registry.load_impls(op_name, ["cupy"])
    bind = registry.registered()[(op_name, "cupy", variant)].bind
    pick = [0]

    def one_config(framework, title, unrunnable, key, label, cols, dtype, device, rows, scratch, bind,
                   kept=True, looped=True):
        space = cuda_rows.configs(cols, dtype.itemsize, kept, looped)
        return space[pick[0] % len(space)]
    monkeypatch.setattr(cuda_rows, "choose_for", one_config)
    failures, ran = [], 0
    for shape in ((3, 781), (5, 4096)):
        kept, looped = {"on_chip": (True, False), "three_pass": (False, True), "online": (False, True)}.get(
            variant, (True, True))
        for pick[0] in range(len(cuda_rows.configs(shape[1], dtype.itemsize, kept, looped))):
            for case in ("random", *op.adversarial):
                if dtype == torch.float32 and (op_name, case) in CUPY_FTZ_FAILS:
                    continue
                inputs = op.inputs(shape, dtype, "cuda", seed=shape[1], case=case)
                for offset in (0, 1):
                    moved = {k: _misaligned(v.flatten(), offset).view(v.shape) if isinstance(v, torch.Tensor) else v
                             for k, v in inputs.items()}
                    made = op.make_output(moved)   # the inputs' rows: some input sets take more
                    out = _misaligned(made.flatten(), offset).view(made.shape)
                    launch = bind(**moved, out=out)
                    result, _ = checked_launch(op, launch, moved, out, dtype, case, shape[1], torch.cuda.synchronize)
                    ran += 1
                    if not result.passed:
                        failures.append(f"{shape} config {launch.config} {case} offset {offset}: {result.detail}")
    assert ran and not failures, "\n".join(failures[:10])


# --- Numba -------------------------------------------------------------------------------

NUMBA_BIND = """
import json, time, torch
from harness import registry
fw = registry.frameworks()["numba"]
fw.prepare(torch.device("cuda:0"))
assert fw.unusable(torch.device("cuda:0")) is None, fw.unusable(torch.device("cuda:0"))
import impls.rmsnorm.numba as m
x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
w = torch.ones(4096, device="cuda", dtype=torch.bfloat16)
started = time.perf_counter()
launch = m.bind(x, w, 1e-6, torch.empty_like(x))
launch()
torch.cuda.synchronize()
stats = [k.stats for k in m.KERNELS.values()]   # the kernels the bind compiled or loaded
print(json.dumps({"seconds": time.perf_counter() - started, "hits": sum(sum(s.cache_hits.values()) for s in stats),
                  "misses": sum(sum(s.cache_misses.values()) for s in stats)}))
"""


def test_a_numba_kernel_compiled_once_loads_from_the_disk_cache_in_the_next_process(tmp_path):
    """The first process compiles (a miss) and writes $HARNESS_CACHE/numba/<hash>; the next
    one loads the kernel from there (a hit, no compile)."""
    if registry.frameworks()["numba"].unusable(torch.device("cuda:0")):
        pytest.skip(registry.frameworks()["numba"].unusable(torch.device("cuda:0")))
    # the repository first, the rest of the path kept (the packages it was set up with)
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "HARNESS_CACHE": str(tmp_path)}
    env.pop("NUMBA_CACHE_DIR", None)
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", NUMBA_BIND], env=env, cwd=ROOT, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    print(f"numba bind, cold: {runs[0]['seconds']:.2f} s, warm: {runs[1]['seconds']:.2f} s")
    assert runs[0]["misses"] >= 1 and runs[1]["misses"] == 0 and runs[1]["hits"] >= 1, runs
    assert list((tmp_path / "numba").iterdir()), "no cache folder under $HARNESS_CACHE/numba"


NUMBA_USABLE = registry.frameworks()["numba"].unusable(torch.device("cuda:0")) is None


def _numba_rows():
    if not NUMBA_USABLE:
        return []
    from tests import numba_keeps
    return numba_keeps.row_impls()


@pytest.mark.parametrize("key", _numba_rows(), ids="-".join)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_a_numba_row_s_bits_do_not_depend_on_where_it_is_kept(monkeypatch, key, dtype):
    """The compiled kernels of a row kept in registers, cached in shared memory and read again
    (each a kernel of its own: NVVM and ptxas may schedule or contract each one its own way)
    give the same bits and pass the checks: rows of 4096 columns (whole, aligned) and 4100
    (misaligned by one element: the kernels for any rows), random and adversarial inputs. The
    simulator's test checks the same on short rows."""
    from tests import numba_keeps
    found = numba_keeps.failures(key, dtype, torch.device("cuda:0"), monkeypatch, ((4096, 0), (4100, 1)), 67,
                                 lambda offset, op: ["random", *op.adversarial])
    assert not found, "\n".join(found)
