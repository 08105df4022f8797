"""A first run's time: builds started with the run (Framework.warm) and what a failed one
becomes, the CUDA build shared between the run's threads and processes. No GPU needed: builds
and timers are stand-ins."""
import json
import threading
import time
from types import SimpleNamespace

import pytest
import torch

from harness.run import plan as planning
from harness import registry
from harness.run.runner import CaseSpec, Settings
from impls._frameworks.cuda import build


def _case(impl, shape=(8, 64), dtype="float32", op="rmsnorm"):
    return CaseSpec(op, impl, "-", dtype, shape)


def test_frameworks_that_build_in_the_background_run_last_within_each_shape():
    cases = [_case(i, s) for s in ((8, 64), (16, 64)) for i in ("cuda", "eager", "numba", "triton")]
    ordered = planning.builds_last(cases, {"cuda", "numba"})
    assert [(c.impl, c.shape) for c in ordered] == [
        ("eager", (8, 64)), ("triton", (8, 64)), ("cuda", (8, 64)), ("numba", (8, 64)),
        ("eager", (16, 64)), ("triton", (16, 64)), ("cuda", (16, 64)), ("numba", (16, 64))]


def test_warm_asks_each_framework_once_with_its_cases_and_a_failing_warm_costs_nothing(capsys):
    asked = {}

    class Starts:
        def warm(self, device, cases):
            asked["starts"] = [c.impl for c in cases]
            return True

    class Breaks:
        def warm(self, device, cases):
            raise OSError("no space left on device")

    cases = [_case(i) for i in ("breaks", "starts", "eager")] + [_case("starts", (16, 64)),
                                                                  CaseSpec("rmsnorm", "starts", "-", "float32", (4, 4),
                                                                           skip_reason="too big")]
    plan = planning.Plan(torch.device("cpu"), "smoke", cases)
    warming = planning.warm(plan, {"starts": Starts(), "breaks": Breaks(), "eager": registry.Framework()})
    assert warming == {"starts"}
    assert asked["starts"] == ["starts", "starts"]   # the runnable ones only
    assert [c.impl for c in plan.cases][:3] == ["breaks", "eager", "starts"]
    assert "breaks: could not start its build early (OSError: no space left on device)" in capsys.readouterr().out


def test_a_bind_whose_framework_turned_out_unusable_is_a_skipped_case_naming_why(cpu_runner, monkeypatch):
    def bind(**_):
        raise build.BuildError("building the CUDA kernels failed (CalledProcessError): rmsnorm.cu(12): error: ...")
    key = ("rmsnorm", "unbuilt", "-")
    monkeypatch.setitem(registry._impls, key, registry.Impl(*key, bind))
    rec = cpu_runner.run(CaseSpec(*key, "float32", (8, 64)))
    assert rec.status == "skipped"
    assert rec.reason.startswith("building the CUDA kernels failed") and "rmsnorm.cu(12)" in rec.reason


@pytest.fixture
def stand_in_build(monkeypatch, tmp_path):
    """build's compile replaced: it takes ``delay`` seconds, then writes the library, or
    raises ``fail``; ``calls`` counts compiles."""
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    monkeypatch.delenv(build.PREBUILT_ENV, raising=False)
    monkeypatch.setattr(build, "build_hash", lambda: "0123456789abcdef")
    state = SimpleNamespace(calls=0, delay=0.0, fail=None)

    def compile_(folder, verbose):
        state.calls += 1
        time.sleep(state.delay)
        if state.fail:
            raise build.BuildError(state.fail)
        (folder / f"{build.NAME}.so").write_bytes(b"")
        (folder / build.DONE).write_text("0.5\n")   # what the real compile writes once the link is done
    monkeypatch.setattr(build, "_compile", compile_)
    return state


def test_a_bind_waits_for_the_build_the_run_started_and_takes_its_library(stand_in_build, monkeypatch):
    monkeypatch.delenv(build.TOKEN_ENV, raising=False)
    stand_in_build.delay = 0.5
    assert build.start() is True
    time.sleep(0.1)   # the background build holds the folder
    library = build.build()
    assert library.name == f"{build.NAME}.so" and library.exists()
    assert stand_in_build.calls == 1   # waited for it, did not build again
    assert build.start() is False      # kept now: nothing to start


def test_a_library_the_linker_is_still_writing_is_not_taken_for_a_build(stand_in_build, monkeypatch):
    monkeypatch.delenv(build.TOKEN_ENV, raising=False)
    folder = build._folder(None)
    folder.mkdir(parents=True)
    (folder / f"{build.NAME}.so").write_bytes(b"\x7fELF half")   # linked halfway: no DONE mark yet
    assert build.kept(None) is None
    build.build()
    assert stand_in_build.calls == 1 and build.kept(None) == folder / f"{build.NAME}.so"


def test_a_lock_file_left_by_a_killed_build_does_not_hold_the_next_one(stand_in_build, monkeypatch):
    monkeypatch.delenv(build.TOKEN_ENV, raising=False)
    folder = build._folder(None)
    folder.mkdir(parents=True)
    (folder / build.TORCH_BATON).write_text("")   # torch waits for this file to go, without limit
    seen = []
    stand_in = build._compile
    monkeypatch.setattr(build, "_compile", lambda f, v: (seen.append((f / build.TORCH_BATON).exists()), stand_in(f, v)))
    build.build()
    assert seen == [False] and stand_in_build.calls == 1


def test_a_failed_build_is_not_tried_again_in_its_run_but_is_in_the_next(stand_in_build, monkeypatch):
    monkeypatch.setenv(build.TOKEN_ENV, "run-1")
    stand_in_build.fail = "building the CUDA kernels failed (CalledProcessError): softmax.cu(3): error"
    for _ in range(2):
        with pytest.raises(build.BuildError, match=r"softmax\.cu\(3\)") as raised:
            build.build()
        assert isinstance(raised.value, registry.Unavailable)
    assert stand_in_build.calls == 1
    monkeypatch.setenv(build.TOKEN_ENV, "run-2")   # a new run (or the source fixed): build again
    stand_in_build.fail = None
    assert build.build().exists() and stand_in_build.calls == 2


def test_two_threads_asking_for_one_build_compile_it_once(stand_in_build, monkeypatch):
    monkeypatch.delenv(build.TOKEN_ENV, raising=False)
    stand_in_build.delay = 0.3
    got = []
    threads = [threading.Thread(target=lambda: got.append(build.build())) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 2 and got[0] == got[1] and stand_in_build.calls == 1


def test_the_cuda_framework_plans_without_building_and_warms_the_build(stand_in_build, monkeypatch):
    if build.nvcc() is None:
        pytest.skip("no nvcc here")
    monkeypatch.setattr(build, "start", lambda: True)
    fw = registry.frameworks()["cuda"]
    assert fw.unusable(torch.device("cuda")) is None and stand_in_build.calls == 0
    assert fw.warm(torch.device("cuda"), [_case("cuda")]) is True


def _first_run_tool():
    import importlib.machinery
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "devtools" / "first-run"
    loader = importlib.machinery.SourceFileLoader("first_run_tool", str(path))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


def test_first_runs_are_summed_per_gpu_from_the_latest_line_of_each_op_and_phase(tmp_path):
    tool = _first_run_tool()

    def line(op, phase, seconds, gpu="NVIDIA H200", cut=False):
        return json.dumps({"kind": "first_run", "op": op, "phase": phase, "seconds": seconds, "cut": cut,
                           "cases": 84, "gpu": gpu, "commit": "abc"})
    path = tmp_path / "first-run.jsonl"
    path.write_text("\n".join([line("rmsnorm", "cold", 300.0), line("rmsnorm", "cold", 200.0),
                               line("rmsnorm", "warm", 100.0), line("softmax", "cold", 150.0, cut=True),
                               line("softmax", "cold", 50.0, gpu="NVIDIA H100"), '{"kind": "first_run", "op'])
                    )   # the last line cut by a kill: left out, the lines before it read
    text = tool.table([str(path)])
    h200 = text[text.index("NVIDIA H200"):]
    assert "| rmsnorm | 84 | 200 | 100 | off | abc |" in h200
    assert "| softmax | 84 | 150+ |  |" in h200
    assert "| these 2 summed | | 350+ | 100 (1 of 2 ops) |" in h200   # a cut part, or an op not measured, makes the sum a lower bound
    assert "**NVIDIA H100**" in text


def test_the_first_run_table_needs_no_torch_and_says_when_a_file_holds_no_first_runs(tmp_path):
    """`devtools/first-run table` runs under the shebang's python3, which on a CPU machine
    whose harness lives in .venv has no torch (-S: no site-packages here)."""
    import subprocess
    import sys
    from pathlib import Path
    tool = Path(__file__).resolve().parent.parent / "devtools" / "first-run"
    path = tmp_path / "first-run.jsonl"
    path.write_text(json.dumps({"kind": "first_run", "op": "copy", "phase": "cold", "seconds": 12.0, "cut": False,
                                "cases": 9, "gpu": "NVIDIA H200", "commit": "abc"}) + "\n")
    proc = subprocess.run([sys.executable, "-S", tool, "table", path], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "| copy | 9 | 12 |" in proc.stdout, proc.stderr
    (tmp_path / "results.jsonl").write_text("")
    proc = subprocess.run([sys.executable, "-S", tool, "table", tmp_path / "results.jsonl"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "no first-run lines in" in proc.stderr, proc.stderr


def test_a_run_that_never_reached_a_case_is_said_and_exits_1(tmp_path, monkeypatch, capsys):
    """Under a python3 without the harness's packages each run died at its import and was
    written down as a 0.1 s first run, exit 0; the runs now take .venv's Python there."""
    tool = _first_run_tool()
    monkeypatch.setattr(tool, "one_run", lambda *a: {"seconds": 0.1, "cut": False, "exit": 1, "cases": 0})
    assert tool.main(["run", str(tmp_path / "first-run.jsonl"), "--ops", "copy", "--phases", "cold"]) == 1
    assert "first-run: copy cold: the harness exited 1 before its first case" in capsys.readouterr().err
    monkeypatch.setattr(tool.importlib.util, "find_spec", lambda name: None)
    venv = tool.ROOT / ".venv" / "bin" / "python"
    assert tool.harness_python() == (str(venv) if venv.exists() else tool.sys.executable)


def test_harness_overrides_after_a_double_dash_reach_each_run(tmp_path, monkeypatch):
    tool = _first_run_tool()
    seen = []
    monkeypatch.setattr(tool, "one_run", lambda op, phase, cache, runs, limit, overrides: seen.append(
        (op, phase, overrides)) or {"seconds": 1.0, "cut": False, "cases": 1})
    out = str(tmp_path / "first-run.jsonl")
    assert tool.main(["run", out, "--ops", "rmsnorm", "--phases", "cold", "--", "sweep=smoke"]) == 0
    assert tool.main(["run", out, "--ops", "softmax", "--phases", "warm", "--"]) == 0
    assert seen == [("rmsnorm", "cold", ["sweep=smoke"]), ("softmax", "warm", [])]


def test_a_first_run_logs_to_mlflow_as_the_readme_s_command_does_where_mlflow_is_there(tmp_path, monkeypatch):
    """Timed as a user runs it: to a local sqlite store (the op's own, in the cache a cold run
    empties), or, where MLflow is not installed, to none, and the line says which."""
    import importlib.util
    tool = _first_run_tool()
    cache = tmp_path / "cache" / "rmsnorm"
    local = tool.tracking_overrides(cache, [])
    assert local == ["tracking=local", f"tracking.uri=sqlite:///{cache.resolve() / 'mlflow.db'}"]
    assert tool.tracking_of(["-m", "harness", *local]) == "local"
    assert tool.tracking_overrides(cache, ["tracking=server"]) == []   # the caller's choice wins
    assert tool.tracking_of(["tracking=server"]) == "server"
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else object())
    assert tool.tracking_overrides(cache, []) == ["tracking=none"]
    assert tool.tracking_of(["op=x", "tracking=none"]) == "off"


def test_a_sigint_to_first_run_stops_its_run_too_and_leaves_the_later_runs_out(tmp_path, monkeypatch):
    """The run is in a session of its own (a cut sends it a SIGINT of its own): a SIGINT to the
    tool itself (a GPU step's time limit) is passed on to the run, its line is written as cut,
    and the ops after it are not started."""
    import signal
    tool = _first_run_tool()
    started, signals = [], []

    real = tool.subprocess.Popen

    class Run:
        pid, returncode = 4242, -2

        def __new__(cls, command, **kwargs):   # the harness's run; anything else (git) as it is
            if command[1:3] != ["-m", "harness"]:
                return real(command, **kwargs)
            started.append(command)
            return super().__new__(cls)

        def __init__(self, command, **kwargs):
            pass

        def wait(self, timeout=None):
            if not signals:
                raise KeyboardInterrupt   # Ctrl-C or a step's limit, while the run runs
            return self.returncode
    monkeypatch.setattr(tool.subprocess, "Popen", Run)
    monkeypatch.setattr(tool.os, "killpg", lambda pid, sig: signals.append((pid, sig)))
    out = tmp_path / "first-run.jsonl"
    code = tool.main(["run", str(out), "--ops", "rmsnorm,softmax", "--phases", "cold",
                      "--cache", str(tmp_path / "cache"), "--runs", str(tmp_path / "runs")])
    assert code == 130 and signals == [(4242, signal.SIGINT)] and len(started) == 1
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(x["op"], x["cut"]) for x in lines] == [("rmsnorm", True)] and "stopped" not in lines[0]


def test_a_cold_run_keeps_every_framework_s_cache_in_the_op_s_and_starts_with_it_empty(tmp_path, monkeypatch, capsys):
    """Triton's, Inductor's, CuPy's and the driver's caches live outside HARNESS_CACHE by default:
    a cold run points them into the op's cache, which it empties, so that what an earlier run on
    the machine compiled does not make it warmer; its warm run finds them there."""
    tool = _first_run_tool()
    envs = []
    real = tool.subprocess.Popen

    class Run:
        pid, returncode = 4243, 0

        def __new__(cls, command, **kwargs):
            if command[1:3] != ["-m", "harness"]:
                return real(command, **kwargs)
            envs.append(kwargs["env"])
            return super().__new__(cls)

        def __init__(self, command, **kwargs):
            pass

        def wait(self, timeout=None):
            return self.returncode
    monkeypatch.setattr(tool.subprocess, "Popen", Run)
    cache = tmp_path / "cache"
    left = cache / "rmsnorm" / "triton" / "an-earlier-binary"
    left.mkdir(parents=True)
    out = tmp_path / "first-run.jsonl"
    assert tool.main(["run", str(out), "--ops", "rmsnorm", "--cache", str(cache), "--runs", str(tmp_path / "runs")]) == 0
    assert len(envs) == 2 and not left.exists()   # cold emptied it
    for env in envs:
        assert env["HARNESS_CACHE"] == str(cache / "rmsnorm")
        for name in ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUPY_CACHE_DIR", "CUDA_CACHE_PATH"):
            assert env[name].startswith(str(cache / "rmsnorm") + "/"), (name, env[name])
    # `env` gives a later step (the GPU script's profile of a warm case) the same caches
    capsys.readouterr()
    assert tool.main(["env", "rmsnorm", "--cache", str(cache)]) == 0
    printed = dict(pair.split("=", 1) for pair in capsys.readouterr().out.split())
    assert printed == {k: envs[-1][k] for k in printed} and len(printed) == 5


def test_bootstrap_s_editable_install_prints_no_setuptools_warning_box(tmp_path):
    """scripts/bootstrap's `pip install -e .` printed setuptools' boxed "Editable installation"
    warning, which a newcomer reads as an error: the warning filter bootstrap gives pip, on
    an editable install of a one-file package (no index, the venv's setuptools)."""
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path
    bootstrap = (Path(__file__).resolve().parent.parent / "scripts" / "bootstrap").read_text()
    given = re.search(r'PYTHONWARNINGS="([^"]+)"\s*\\?\s*\.venv/bin/python -m pip install', bootstrap)
    assert given, "scripts/bootstrap gives pip no warning filter"
    (tmp_path / "pkg" / "tiny").mkdir(parents=True)
    (tmp_path / "pkg" / "tiny" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tiny"\nversion = "0"\n')
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                           "--no-index", "--prefix", str(tmp_path / "prefix"), "-e", str(tmp_path / "pkg")],
                          env={**os.environ, "PYTHONWARNINGS": given.group(1)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Editable installation" not in proc.stdout + proc.stderr and "!!" not in proc.stderr, proc.stderr


# --- held back while building ------------------------------------------------------------

class _Recorder:
    """A stand-in runner: the order cases run in, and whether the build was over for each."""

    def __init__(self, building):
        self.ran, self.building = [], building

    def run(self, spec):
        from harness.run.runner import base_record
        self.ran.append((spec.impl, spec.shape, self.building()))
        rec = base_record(spec, torch.device("cpu"), Settings(), {})
        rec.status, rec.median_us = "ok", 1.0
        return rec


def _session(cases, building, runner):
    from harness.run.session import Session
    return Session(cases, 1, torch.device("cpu"), Settings(), lambda: runner, building=building)


def test_a_case_whose_framework_still_builds_runs_once_the_build_is_over_not_before():
    cases = [_case(i, s) for s in ((8, 64), (16, 64), (24, 64)) for i in ("eager", "cuda")]
    done = {"after": 3}   # the build ends once three cases have run
    runner = _Recorder(lambda: len(runner.ran) < done["after"])
    session = _session(cases, lambda impl: impl == "cuda" and runner.building(), runner)
    records = list(session.records(SimpleNamespace(case=lambda text: None)))
    assert [(impl, shape) for impl, shape, _ in runner.ran] == [
        ("eager", (8, 64)), ("eager", (16, 64)), ("eager", (24, 64)),
        ("cuda", (8, 64)), ("cuda", (16, 64)), ("cuda", (24, 64))]
    assert not any(building for impl, _, building in runner.ran if impl == "cuda")
    assert sorted((r.impl, tuple(r.shape)) for r in records) == sorted((c.impl, c.shape) for c in cases)
    assert all(r.status == "ok" for r in records)


def test_a_build_that_never_ends_holds_its_cases_only_until_nothing_else_is_left():
    cases = [_case(i, s) for s in ((8, 64), (16, 64)) for i in ("cuda", "eager")]
    runner = _Recorder(lambda: True)
    session = _session(cases, lambda impl: impl == "cuda", runner)
    list(session.records(SimpleNamespace(case=lambda text: None)))
    assert [(impl, shape) for impl, shape, _ in runner.ran] == [
        ("eager", (8, 64)), ("eager", (16, 64)), ("cuda", (8, 64)), ("cuda", (16, 64))]


def test_cases_held_back_when_a_sigint_lands_are_recorded_as_not_run():
    from harness.records.record import NOT_RUN
    cases = [_case(i, s) for s in ((8, 64), (16, 64)) for i in ("cuda", "eager")]

    class Interrupted(_Recorder):
        def run(self, spec):
            if spec.shape == (16, 64):
                raise KeyboardInterrupt
            return super().run(spec)
    runner = Interrupted(lambda: True)
    session = _session(cases, lambda impl: impl == "cuda", runner)
    records = list(session.records(SimpleNamespace(case=lambda text: None)))
    assert session.interrupted
    by_case = {(r.impl, tuple(r.shape)): r for r in records}
    assert len(records) == 4 and by_case[("eager", (8, 64))].status == "ok"
    assert by_case[("eager", (16, 64))].status == "error"
    for shape in ((8, 64), (16, 64)):
        assert (by_case[("cuda", shape)].status, by_case[("cuda", shape)].reason) == ("skipped", NOT_RUN)
