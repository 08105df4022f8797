"""The CLI end to end, in a subprocess, as a user runs it; bad inputs included."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers import ROOT, results, run_harness


harness = run_harness


@pytest.mark.slow
def test_every_op_runs_eager_on_the_smoke_sweep_and_logs_to_mlflow(tmp_path):
    proc = harness(tmp_path, "op=all", "impl=eager", "sweep=smoke")
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = results(tmp_path)
    ops = {r["op"] for r in recs}
    assert len(ops) == 8
    assert {r["status"] for r in recs if not r["negative_control"]} == {"ok"}
    # every negative control fails its adversarial inputs at every shape, 1x7 included
    assert {r["status"] for r in recs if r["negative_control"]} == {"fail"}
    required = ["op", "impl", "variant", "dtype", "shape", "bytes", "status", "reason", "median_us",
                "median_lo_us", "median_hi_us", "p10_us", "p90_us", "samples", "gbps", "roof_gbps", "pct_roof",
                "max_abs_err", "max_rel_err", "passed", "n_distinct", "max_ulp_spread", "deterministic",
                "batch_invariant", "provenance"]
    for r in recs:
        assert all(k in r for k in required)
        assert r["timer"] == "wall" and r["samples"] >= 1
        assert {"host", "git_sha", "versions"} <= set(r["provenance"])
    assert "GB/s (% of roof)" in proc.stdout and (tmp_path / "run" / "table.txt").exists()
    assert " ui --backend-store-uri sqlite:///" in proc.stdout
    from mlflow.tracking import MlflowClient
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name("kernel-harness")
    cases = client.search_runs([exp.experiment_id], "tags.`harness.kind` = 'case'", max_results=5000)
    assert len(cases) == len(recs)
    # the plots and the report, in the output folder and on the invocation run
    run = tmp_path / "run"
    plots = sorted(p.name for p in (run / "plots").iterdir())
    assert len(plots) == 2 * len({(r["op"], r["dtype"]) for r in recs})   # gbps and % of roof per op and dtype
    report = (run / "report.html").read_text()
    assert report.count("data:image/png;base64,") == len(plots) and "copy · float32 · cpu" in report
    inv = client.search_runs([exp.experiment_id], "tags.`harness.kind` = 'invocation'")[0]
    logged = {a.path for a in client.list_artifacts(inv.info.run_id)}
    assert {"results.jsonl", "table.txt", "report.html", "plots"} <= logged
    assert {a.path for a in client.list_artifacts(inv.info.run_id, "plots")} == {f"plots/{p}" for p in plots}


def test_comma_list_of_impls_runs_them_shape_by_shape(tmp_path):
    """impl=a,b in one run, no multirun; every impl of a shape back to back (what is
    compared is timed seconds apart), shapes in the order given."""
    proc = harness(tmp_path, "op=copy", "impl=eager,torch_compile", "sweep=smoke", "dtype=bf16",
                   "shapes=[[3000],[1000]]", "tracking=none", "isolate=false")
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = results(tmp_path)
    assert [(r["shape"], r["impl"]) for r in recs] == \
        [([3000], "eager"), ([3000], "torch_compile"), ([1000], "eager"), ([1000], "torch_compile")]
    assert all(r["median_lo_us"] <= r["median_us"] <= r["median_hi_us"] for r in recs)   # the median's interval


def test_a_variant_filter_keeps_the_impls_that_have_only_one_version(tmp_path):
    """variant=on_chip: Triton's on_chip softmax against eager's one version, not Triton's
    other variants."""
    proc = harness(tmp_path, "op=softmax", "impl=eager,triton", "variant=on_chip", "dtype=fp32",
                   "shapes=[[3,50]]", "tracking=none", "isolate=false")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [(r["impl"], r["variant"], r["status"]) for r in results(tmp_path)] == \
        [("eager", "-", "ok"), ("triton", "on_chip", "ok")]
    # on a CPU, sweep=auto's note says that the shapes given stand (it named the GPU-sized ones)
    assert torch.cuda.is_available() or "(its sampling; your shapes= replace its shapes)" in proc.stdout


def test_multirun_sweeps_over_ops(tmp_path):
    proc = harness(tmp_path, "-m", "op=copy,scale", "impl=eager", "sweep=smoke", "dtype=fp32",
                   "tracking=none", "isolate=false")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # job folders named by what the sweep varies; one summary of every job at the end
    assert [r["op"] for r in results(tmp_path, "multi/0-op=copy")] == ["copy"] * 3
    assert [r["op"] for r in results(tmp_path, "multi/1-op=scale")] == ["scale"] * 3
    summary = proc.stdout[proc.stdout.index("== multirun: 2 jobs"):]
    assert "0-op=copy: 3 ok" in summary and "1-op=scale: 3 ok" in summary and "all jobs: 6 ok" in summary
    combined = (tmp_path / "multi" / "report.html").read_text()
    assert "copy · float32 · cpu" in combined and "scale · float32 · cpu" in combined


def test_two_runs_started_in_one_second_get_a_folder_each(tmp_path, monkeypatch):
    """outputs/<date>/<time> was shared by runs started within a second: one results.jsonl
    with both, the table and report of the last to finish."""
    from omegaconf import OmegaConf

    from harness.run import multirun
    base = str(tmp_path / "outputs" / "2026-12-05" / "08-00-00")
    monkeypatch.setattr(multirun, "_run_dir", None)
    cfg = OmegaConf.create({"dir": "${harness_run_dir:" + base + "}"})
    assert cfg.dir == base and cfg.dir == base   # one claim per process, however often resolved
    monkeypatch.setattr(multirun, "_run_dir", None)   # another run's process
    assert multirun.run_dir(base) == base + "-2"
    monkeypatch.setattr(multirun, "_run_dir", None)
    assert multirun.run_dir(base) == base + "-3"
    assert sorted(p.name for p in (tmp_path / "outputs" / "2026-12-05").iterdir()) == ["08-00-00", "08-00-00-2",
                                                                                        "08-00-00-3"]


def test_a_run_folder_that_cannot_be_made_is_named(tmp_path):
    from harness.commands import options
    from harness.errors import ConfigError
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ConfigError, match=re.escape(f"hydra.run.dir={tmp_path}/a-file/run: the run's folder cannot "
                                                    f"be made in {tmp_path}/a-file (NotADirectoryError")):
        options.check_run_folders(["op=copy", f"hydra.run.dir={tmp_path}/a-file/run"])
    options.check_run_folders([f"hydra.sweep.dir={tmp_path}/multi/a", f"hydra.run.dir={tmp_path}/out/${{now:%H}}",
                               f"hydra.run.dir={tmp_path}"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]   # nothing made


def test_a_job_folder_is_a_safe_name_of_what_the_sweep_varies(monkeypatch):
    from harness.run import multirun
    monkeypatch.setattr(multirun, "_task_overrides", lambda: ["op=copy", "impl=eager", "tracking.uri=http://h:5000/x"])
    monkeypatch.setattr(sys, "argv", ["harness", "-m", "op=copy,scale", "impl=eager", "tracking.uri=http://h:5000/x"])
    assert multirun.job_dir(0) == "0-op=copy"
    monkeypatch.setattr(sys, "argv", ["harness", "-m", "impl=eager"])   # swept keys unknown: every override
    name = multirun.job_dir(3)
    assert name == "3-op=copy,impl=eager,tracking.uri=http:__h:5000_x" and "/" not in name
    monkeypatch.setattr(multirun, "_task_overrides", lambda: ["shapes=" + "[1000]," * 100])
    assert len(multirun.job_dir(12)) == multirun.NAME_LIMIT
    # a sweep of lists, a range, a key added with +: each named by what varies
    monkeypatch.setattr(multirun, "_task_overrides", lambda: ["shapes=[[3000]]", "+x=1", "seed=2", "op=copy"])
    monkeypatch.setattr(sys, "argv", ["harness", "-m", "shapes=[[3000]],[[1000]]", "+x=1,2", "seed=range(3)",
                                      "op=copy"])
    assert multirun.job_dir(1) == "1-shapes=[[3000]],+x=1,seed=2"


def test_unusable_impls_are_skipped_with_the_reason_under_impl_all(tmp_path):
    proc = harness(tmp_path, "op=rmsnorm", "impl=all", "sweep=smoke", "dtype=fp32", "shapes=[[2,64]]",
                   "tracking=none", "isolate=false")
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = results(tmp_path)
    if not torch.cuda.is_available():
        liger = [r for r in recs if r["impl"] == "liger"]
        assert liger and liger[0]["status"] == "skipped" and liger[0]["reason"]


@pytest.mark.parametrize("argv", [
    ["op=rmsnorm", "tracking=none", "hydra.run.dir=/tmp/x"],
    ["-m", "hydra/launcher=slurm", "hydra.sweep.dir=/tmp/j", "op=copy,scale", "sweep=full", "sweep.seeds=1",
     "tracking.uri=http://h:5000", "tracking.parent_run_id=abc", "hydra.launcher.partition=h200"],
    ["op=rmsnorm", "+hydra.job.chdir=false", "~roof.bytes", "roof={cache:false}", "shapes=[[4,4]]"],
    ["op=all", "ops.softmax.shapes.smoke=[[1,7]]", "ops.rmsnorm.params.eps=1e-5"],
    ["op=[rmsnorm,layernorm]", "ops.layernorm.params.eps=1e-5"],
    ["op=choice(copy,scale)", "ops.sum.shapes.smoke=[[7]]"],   # a sweep function: Hydra resolves it
])
def test_the_key_check_takes_every_form_hydra_does(argv):
    from harness.commands import keys
    from harness.run import plan
    keys.check(argv, plan.CONF_DIR)


@pytest.mark.parametrize("argv, message", [
    (["op=rmsnorm", "ops.softmax.shapes.smoke=[[1,7]]"],
     "ops.softmax.shapes.smoke: op softmax is not among the ops given (rmsnorm); add it to op= (op=[rmsnorm,softmax])"),
    (["op=rmsnorm", "+ops.softmax.params.x=1"], "op softmax is not among the ops given"),
    (["op=rmsnorm", "ops.rmsnrom.params.eps=1"], "unknown key 'ops.rmsnrom.params.eps' (did you mean 'ops.rmsnorm'?)"),
    (["op=copy", "ops.copy.params.x=1"], "unknown key 'ops.copy.params.x'; ops.copy.params takes no keys"),
    (["op=copy", "seed.x=1"], "unknown key 'seed.x': seed is a value, not a group of keys; give seed=..."),
])
def test_the_key_check_names_what_it_refuses(argv, message):
    from harness.commands import keys
    from harness.run import plan
    from harness.errors import ConfigError
    with pytest.raises(ConfigError) as e:
        keys.check(argv, plan.CONF_DIR)
    assert message in str(e.value), str(e.value)


@pytest.mark.parametrize("args,code,message", [
    (["op=rmsnrom"], 2, "unknown op 'rmsnrom' (did you mean 'rmsnorm'?); valid: all, copy"),
    (["op=[rmsnorm,sofmax]"], 2, "unknown op 'sofmax' (did you mean 'softmax'?)"),
    ([], 2, "no op given; add op=<name>"),
    (["op=rmsnorm", "seed=abc"], 2, "seed='abc': give a whole number"),
    (["op=rmsnorm", "seed=99999999999999999999999"], 2, "seed=99999999999999999999999: give a whole number from"),
    (["op=rmsnorm", "case_timeout_s=-1"], 2, "case_timeout_s=-1: give the seconds a case may take"),
    (["op=rmsnorm", "case_timeout_s=soon"], 2, "case_timeout_s='soon'"),
    (["op=rmsnorm", "impl=trition"], 2, "unknown impl 'trition' (did you mean 'triton'?)"),
    (["op=rmsnorm", "dtype=fp64"], 2, "unknown dtype 'fp64'"),
    (["op=rmsnorm", "variant=atomic"], 2, "unknown variant 'atomic'"),
    (["op=rmsnorm", "variant=idiomatic", "device=cpu"], 2, "not listed: the variants of cuda, cupy"),
    (["op=rmsnorm", "sweep=huge"], 2, "unknown sweep 'huge'; valid: auto, default, full, smoke"),
    (["op=rmsnorm", "tracking=cloud"], 2, "unknown tracking 'cloud'"),
    (["op=rmsnorm", "tracking=local", "tracking.uri=garbage"], 2, "tracking.uri: 'garbage' is not an MLflow tracking URI"),
    (["op=rmsnorm", "shapes=[[0,4096]]"], 2, "empty or negative"),
    (["op=rmsnorm", "shapes=[[-3,4096]]"], 2, "empty or negative"),
    (["op=rmsnorm", "shapes=[[4096]]"], 2, "takes 2-D shapes"),
    (["op=[copy,rmsnorm]", "shapes=[[7,33]]"], 2, "shapes= applies to every op given, and these take 1-D (copy) "
                                                 "and 2-D (rmsnorm): run each rank apart"),
    (["op=copy", "shapes=[[4000000000000]]"], 2, "choose smaller shapes"),
    (["op=rmsnorm", "shapes=banana"], 2, "give a list of shapes"),
    (["op=rmsnorm", "device=tpu"], 2, "unknown device 'tpu'"),
    (["op=rmsnorm", "frameworks.torch_compile.shapes=dynamic"], 2,
     "unknown frameworks.torch_compile.shapes 'dynamic' (did you mean 'dynamic_rows'?); valid: dynamic_rows, static"),
    (["op=rmsnorm", "frameworks.torch_compile.shape=static"], 2, "unknown key 'frameworks.torch_compile.shape' (did "
     "you mean 'frameworks.torch_compile.shapes'?); frameworks.torch_compile has: shapes"),
    (["op=rmsnorm", "torch_compile_shapes=static"], 2,
     "torch_compile_shapes is now frameworks.torch_compile.shapes: give frameworks.torch_compile.shapes=static"),
    (["op=rmsnorm", "tuning=fresh"], 2, "unknown key 'tuning'"),   # a run never searches: harness-tune does
    (["op=rmsnorm", "processes=0"], 2, "processes=0: give a whole number >= 1"),
    (["op=rmsnorm", "processes=banana"], 2, "processes='banana': give a whole number >= 1"),
    (["op=rmsnorm", "processes=2.5"], 2, "give a whole number >= 1"),
    (["op=rmsnorm", "processes=3", "isolate=false"], 2, "processes=3 needs worker processes: drop isolate=false"),
    (["op=rmsnorm", "shape=[[4,4]]"], 2, "unknown key 'shape' (did you mean 'shapes'?); valid keys: case_timeout_s"),
    (["op=rmsnorm", "+ops.rmsnorm.params.epsilon=1"], 2, "unknown key 'ops.rmsnorm.params.epsilon' (did you "
                                                         "mean 'ops.rmsnorm.params.eps'?); ops.rmsnorm.params has: eps"),
    (["op=rmsnorm", "sweep.seeds=1"], 2, "sweep.seeds changes a named sweep: add sweep=smoke"),
    (["op=rmsnorm", "ops.rmsnorm.params.eps=tiny"], 2, "op rmsnorm cannot take ops.rmsnorm.params.eps='tiny'"),
    (["op=rmsnorm", "strict=maybe"], 2, "strict='maybe': give true or false"),
    (["op=rmsnorm", "roof.max_age_s=day"], 2, "roof.max_age_s='day': give the seconds a measured roof is reused"),
    (["op=rmsnorm", "shapes=[[4,", "64]]"], 2, "shapes=[[4, 64]] reached the harness as 2 arguments (the shell "
                                              "split it at its spaces): quote it ('shapes=[[4, 64]]') or leave out "
                                              "the spaces (shapes=[[4,64]])"),
    (["op=rmsnorm", "shapes=[[4,64]"], 2, "shapes=[[4,64]: its brackets do not close"),
    (["rmsnorm"], 2, "rmsnorm: arguments are key=value; did you mean op=rmsnorm?"),
    (["op=rmsnorm", "fp16"], 2, "fp16: not a key=value argument"),
])
def test_bad_input_gets_a_clear_error(tmp_path, args, code, message):
    proc = harness(tmp_path, *args, *([] if any(a.startswith("tracking=") for a in args) else ["tracking=none"]))
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()   # a refused command line leaves no run folder


def test_a_working_folder_that_cannot_be_written_is_one_line_naming_it(tmp_path):
    """The default run folder (outputs/ under the working folder) cannot be made: one line
    and exit 2, where Hydra's mkdir gave 115 lines of traceback and exit 1. Read-only by a
    read-only mount as root (root writes through permission bits), else by its mode."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs",
                                                    str(folder)], capture_output=True).returncode == 0
    if not mounted:
        if os.geteuid() == 0:
            pytest.skip("root, and no read-only mount could be made")
        folder.chmod(0o555)
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_CACHE": str(tmp_path / "cache")}
        for args in (["op=copy"], ["-m", "op=copy,scale"]):
            proc = subprocess.run([sys.executable, "-m", "harness", *args, "tracking=none"], cwd=folder, env=env,
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr[-3000:]
            assert f"the run's folder cannot be made in {folder} (OSError: Read-only file system)" in proc.stderr \
                or f"cannot be made in {folder} (PermissionError" in proc.stderr, proc.stderr
            assert ("hydra.sweep.dir=" if "-m" in args else "hydra.run.dir=") in proc.stderr
    finally:
        if mounted:
            subprocess.run(["umount", str(folder)], check=True)
        else:
            folder.chmod(0o755)


def test_a_sigint_while_a_command_imports_is_a_line_and_exit_130(tmp_path):
    """Importing torch and Hydra takes a command's first seconds; a Ctrl-C there is no traceback."""
    import signal
    import time
    (tmp_path / "slow_to_import.py").write_text("import sys, time\nprint('importing', flush=True)\ntime.sleep(30)\n"
                                                "def main(): sys.exit(0)\n")
    proc = subprocess.Popen([sys.executable, "-c", "from harness import entry; entry.start('harness', 'slow_to_import')"],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "importing\n"
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert err == "harness: interrupted (SIGINT) while starting: nothing was run\n"


def test_a_reader_that_leaves_early_costs_no_traceback(tmp_path):
    """`harness-compare A B | head`: the rest of the output has nowhere to go; exit 141, quietly."""
    (tmp_path / "loud.py").write_text("def main():\n    for i in range(10**6):\n        print('line', i)\n")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from harness import entry; "
                             "sys.exit(entry.start('harness-x', 'loud'))"],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "line 0\n"
    proc.stdout.close()
    assert proc.wait(timeout=20) == 141
    assert proc.stderr.read() == ""


def test_every_command_starts_through_the_guarded_entry(monkeypatch):
    import importlib
    import tomllib
    from harness import entry
    started = []
    monkeypatch.setattr(entry, "start", lambda command, module: started.append((command, module)) or 7)
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for command, target in scripts.items():
        module, _, name = target.partition(":")
        assert module == "harness.entry", command
        assert getattr(entry, name)() == 7, f"{command} drops its main's exit code"
        assert started[-1][0] == command
        assert callable(importlib.import_module(started[-1][1]).main), command


def test_a_command_exits_with_what_its_main_returns(tmp_path, monkeypatch):
    """The console script does sys.exit(entry.<command>()): main's 2 for a bad argument, or
    harness-compare's 1 for a regression, must come back through start."""
    from harness import entry
    (tmp_path / "returns_three.py").write_text("def main():\n    return 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert entry.start("harness-x", "returns_three") == 3


@pytest.mark.parametrize("arg,message", [
    ("isolate=sometimes", "isolate='sometimes': give true or false"),
    ("roof.cache=maybe", "roof.cache='maybe': give true or false"),
    ("roof.bytes=2.5e9", "roof.bytes=2500000000.0: give the bytes"),
    ("roof.max_age_s=day", "roof.max_age_s='day': give the seconds"),
    ("processes=2.5", "processes=2.5: give a whole number >= 1"),
    ("sweep.timing.max_seconds=long", "sweep.timing.max_seconds='long'"),
])
def test_a_value_its_key_s_type_refuses_is_an_error_naming_the_key(arg, message):
    from harness.commands import keys, schema
    from harness.errors import ConfigError
    with pytest.raises(ConfigError, match=re.escape(message)):
        keys.check_value(schema.current(), arg)


@pytest.mark.parametrize("key,value,message", [
    ("roof.bytes", 0, "roof.bytes=0: give the bytes"),
    ("roof.max_age_s", -1, "roof.max_age_s=-1: give the seconds"),
    ("roof.max_age_s", float("nan"), "roof.max_age_s=nan: give the seconds"),
])
def test_a_roof_setting_out_of_range_is_refused(key, value, message):
    from omegaconf import OmegaConf

    from harness.commands import options, schema
    from harness.errors import ConfigError
    cfg = OmegaConf.structured(schema.current())
    options.check_values(cfg)
    OmegaConf.update(cfg, key, value)
    with pytest.raises(ConfigError, match=re.escape(message)):
        options.check_values(cfg)


def test_a_plugin_that_cannot_be_imported_is_an_error_naming_it(monkeypatch, tmp_path):
    """A plugin not found says to put it on PYTHONPATH; a plugin whose own import fails names
    the module it lacks."""
    from harness import registry
    from harness.errors import ConfigError
    monkeypatch.setenv("HARNESS_PLUGINS", "no_such_team.kernels")
    with pytest.raises(ConfigError, match="HARNESS_PLUGINS names 'no_such_team.kernels', which cannot be imported "
                                          r"\(ModuleNotFoundError: No module named 'no_such_team'\); put its package "
                                          "on PYTHONPATH"):
        registry.ops()
    (tmp_path / "team_kernels_needing_more.py").write_text("import no_such_dependency_of_the_team\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("HARNESS_PLUGINS", "team_kernels_needing_more")
    with pytest.raises(ConfigError, match="names 'team_kernels_needing_more', which imports "
                                          "'no_such_dependency_of_the_team', which cannot be imported .*; install "
                                          "'no_such_dependency_of_the_team'"):
        registry.ops()


def test_a_sigint_before_the_cases_is_a_line_and_exit_130_not_a_traceback(monkeypatch, capsys):
    from harness.commands import cli
    from harness.run import plan as planning

    def interrupted(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(planning, "build", interrupted)
    cfg = __import__("omegaconf").OmegaConf.create({"device": "cpu", "processes": 1, "seed": None,
                                                    "case_timeout_s": 900, "isolate": True, "strict": False,
                                                    "roof": {"cache": True, "max_age_s": 0, "bytes": 1 << 30},
                                                    "sweep": {"name": "smoke"}})
    assert cli.run_guarded(cfg) == cli.INTERRUPTED_EXIT
    assert "harness: interrupted (SIGINT) before the first case: nothing was recorded" in capsys.readouterr().err


def test_a_cache_folder_that_cannot_be_written_is_named(tmp_path, monkeypatch):
    from harness.measure import roofline
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    assert roofline.cache_unwritable() is None and (tmp_path / "cache").is_dir()
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "a-file"))
    assert roofline.cache_unwritable().startswith(f"{tmp_path / 'a-file'} cannot be written (FileExistsError")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a GPU")
def test_gpu_only_requests_on_a_cpu_machine_are_refused(tmp_path):
    proc = harness(tmp_path, "op=rmsnorm", "device=cuda", "tracking=none")
    assert proc.returncode == 2 and "no CUDA GPU is visible" in proc.stderr
    proc = harness(tmp_path, "op=rmsnorm", "impl=liger", "tracking=none")
    assert proc.returncode == 2 and "impl 'liger' cannot run on cpu" in proc.stderr


def test_an_unreachable_tracking_server_costs_nothing(tmp_path):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proc = harness(tmp_path, "op=copy", "impl=eager", "sweep=smoke", "dtype=fp32", "isolate=false",
                   f"tracking.uri=http://127.0.0.1:{port}", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert len(results(tmp_path)) == 3
    assert "harness-upload" in proc.stdout and "unreachable" in proc.stderr
    command = proc.stdout.split("When the server is back:")[1].split()[0]   # runs as printed
    assert Path(command).exists() or command == sys.executable, proc.stdout


def test_an_sqlite_store_that_cannot_be_opened_says_what_to_give(tmp_path):
    """tracking.uri naming a folder as the sqlite file: the records are kept, the message says
    what to give instead, and the upload line does not wait for a server."""
    (tmp_path / "a-folder.db").mkdir()
    proc = harness(tmp_path, "op=copy", "impl=eager", "sweep=smoke", "dtype=fp32", "isolate=false",
                   f"tracking.uri=sqlite:///{tmp_path / 'a-folder.db'}", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert len(results(tmp_path)) == 3
    assert "the sqlite store cannot be opened" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "When the store can be opened:" in proc.stdout and "server is back" not in proc.stdout, proc.stdout


def test_help_says_what_it_does_and_lists_every_key(tmp_path):
    for flag in ("--help", "-h"):
        proc = subprocess.run([sys.executable, "-m", "harness", flag], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        for words in ("compare GPU kernel implementations", "op ", "choices: all, copy", "case_timeout_s=900",
                      "roof.cache=true", "roof.max_age_s=86400", "tracking.uri=", "ops.<op>.params.<name>=", "examples:", "harness op=rmsnorm impl=all"):
            assert words in proc.stdout, (words, proc.stdout)


def test_a_dtype_or_shape_given_twice_runs_once(tmp_path):
    proc = harness(tmp_path, "op=rmsnorm", "impl=[eager,eager]", "dtype=[fp32,float32]",
                   "shapes=[[2,8],[2,8]]", "tracking=none", "isolate=false")
    assert proc.returncode == 0, proc.stderr
    assert len(results(tmp_path)) == 1
    assert not list((tmp_path / "run").glob("*.log"))   # no empty Hydra job log beside the results


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter is the CPU's")
def test_interpreted_impls_skip_shapes_too_large_to_interpret(tmp_path):
    proc = harness(tmp_path, "op=copy", "impl=triton", "dtype=fp32", "shapes=[[1000],[50000000]]",
                   "tracking=none", "isolate=false", "sweep=smoke")
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = {r["shape"][0]: r for r in results(tmp_path)}
    assert recs[1000]["status"] == "ok"
    assert recs[50000000]["status"] == "skipped" and "too large for an interpreter" in recs[50000000]["reason"]


def test_gpu_sized_shapes_on_a_cpu_are_said_to_take_minutes_before_they_start():
    """sweep=full on a CPU ran for hours without a word (one 1 GiB case: over 4 minutes)."""
    from harness.run import plan as planning
    from harness.run.runner import CaseSpec

    def case(shape, skip=None):
        return CaseSpec("rmsnorm", "eager", "-", "float32", shape, {"eps": 1e-6}, skip)
    cpu = torch.device("cpu")
    note = planning.slow_on_cpu(planning.Plan(cpu, "full", [case((4, 4096)), case((32768, 4096)),
                                                             case((65536, 4096), skip="too large")]))
    assert note.startswith("1 of the 2 cases to run move 256 MiB or more (up to 1024 MiB)"), note
    assert planning.slow_on_cpu(planning.Plan(cpu, "smoke", [case((4, 4096))])) is None
    assert planning.slow_on_cpu(planning.Plan(torch.device("cuda"), "full", [case((32768, 4096))])) is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU's choice")
def test_sweep_auto_takes_the_smoke_shapes_on_a_cpu(tmp_path):
    proc = harness(tmp_path, "op=scale", "impl=eager", "dtype=fp32", "tracking=none", "isolate=false")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "sweep=auto chose the smoke sweep" in proc.stdout
    assert "isolate=false: the cases run in this process, so case_timeout_s is not enforced" in proc.stderr
    assert [r["shape"] for r in results(tmp_path)] == [[7], [1000], [4099]]


def test_torch_compile_shapes_static_or_dynamic_rows_is_recorded(tmp_path):
    """The torch.compile peer with a kernel per shape, or one per row length (default); the
    record says which ran, and the batch-invariance check runs either way."""
    for mode in ("static", "dynamic_rows"):
        args = ["op=rmsnorm", "impl=torch_compile", "dtype=fp32", "shapes=[[9,64]]", "tracking=none"]
        if mode == "static":
            args.append("frameworks.torch_compile.shapes=static")
        (tmp_path / mode).mkdir()
        proc = harness(tmp_path / mode, *args)
        assert proc.returncode == 0, proc.stderr[-3000:]
        [rec] = results(tmp_path / mode)
        assert rec["status"] == "ok" and rec["passed"], rec["reason"]
        assert rec["impl_config"] == {"shapes": mode}
        assert rec["batch_invariant"] is not None


def test_static_shapes_leave_the_rows_unmarked():
    from harness import registry
    from impls._frameworks import torch_compile
    try:
        for mode, marked in (("static", False), ("dynamic_rows", True)):
            registry.configure({"torch_compile": {"shapes": mode}})
            t = torch.zeros(3, 4)
            torch_compile.rows_dynamic(t)
            assert (0 in getattr(t, "_dynamo_weak_dynamic_indices", set())) == marked
    finally:
        registry.configure({})


def test_a_sigint_while_the_worker_stops_kills_it_and_the_run_goes_on():
    """A time limit's SIGINT landing after the last case, in the worker's join: the run
    kills the worker and goes on to its table (which it would otherwise lose), saying it
    was interrupted."""
    from harness.run.session import stop as _stop

    class SlowToStop:
        def __init__(self):
            self.calls = []

        def stop(self, kill=False):
            self.calls.append(kill)
            if not kill:
                raise KeyboardInterrupt

    runner = SlowToStop()
    assert _stop(runner, interrupted=False) is True
    assert runner.calls == [False, True]
    calm = type("Calm", (), {"stop": lambda self, kill=False: None})()
    assert _stop(calm, interrupted=False) is False and _stop(None, interrupted=True) is True


def _run_with(tmp_path, monkeypatch, runner_cls, overrides):
    """The harness in this process on ``overrides`` (cli.run_guarded, as the command runs
    it), its cases run by ``runner_cls(device, settings)`` (None: the harness's own runner):
    (the config, the exit code). The JSONL lands in tmp_path."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from harness.commands import cli
    from harness.run import plan as planning
    if runner_cls is not None:
        monkeypatch.setattr(cli, "_runner", lambda cfg, device, settings: runner_cls(device, settings))
    with initialize_config_dir(config_dir=str(planning.CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(tmp_path)
    HydraConfig.instance().set_config(cfg)
    try:
        return cfg, cli.run_guarded(cfg)
    finally:
        HydraConfig.instance().cfg = None   # not this process's other tests' Hydra config


@pytest.mark.parametrize("processes", [1, 3])
def test_an_interrupted_run_keeps_every_record_and_says_so_in_its_exit_code(tmp_path, monkeypatch, capsys, processes):
    """A SIGINT in the second of three cases: the first record as it ran, the second an
    error naming the interrupt, the third skipped; all in the JSONL and the table; the
    MLflow invocation run KILLED with interrupted = 1; exit code 130, not 0. With
    processes=3 the SIGINT lands in the second case's second process: that case's record
    is its first process's measurement, saying so."""
    import json

    from harness.commands import cli

    from harness.run import runner

    class InterruptedSecond:
        """Its second case meets a SIGINT: at once with one process, in its second process
        with three (the cases are of three shapes: three cells, each run whole)."""

        def __init__(self, device, settings):
            self.device, self.settings, self.calls = device, settings, []

        def measured(self, spec):
            rec = runner.base_record(spec, self.device, self.settings, {})
            rec.status, rec.median_us, rec.timer = "ok", 5.0, "cuda_events"
            return rec

        def run(self, spec):
            self.calls.append(spec.shape)
            if self.calls.count((200,)) == min(processes, 2):
                raise KeyboardInterrupt
            return self.measured(spec)

        run_fresh = run

        def stop(self, kill=False):
            pass

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cfg, code = _run_with(tmp_path, monkeypatch, InterruptedSecond,
                          ["op=copy", "impl=eager", "dtype=fp32", "shapes=[[100],[200],[300]]",
                           f"tracking.uri={uri}", "device=cpu", f"processes={processes}"])
    assert code == cli.INTERRUPTED_EXIT == 130
    recs = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    second = "error" if processes == 1 else "ok"
    assert [(r["shape"], r["status"]) for r in recs] == [([100], "ok"), ([200], second), ([300], "skipped")]
    assert "interrupted" in recs[1]["reason"] and "interrupted" in recs[2]["reason"]
    if processes > 1:
        assert recs[1]["reason"].startswith("interrupted (SIGINT) after 1 of 3 processes")
        assert recs[1]["process_medians_us"] == [5.0] and recs[1]["gbps"] is not None
        assert "(median of 1 process: 5.00 us) [interrupted (SIGINT) after 1 of 3 processes" in capsys.readouterr().out
    assert (tmp_path / "table.txt").exists()
    from mlflow.tracking import MlflowClient
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(str(cfg.tracking.experiment))
    (inv,) = client.search_runs([exp.experiment_id], "tags.`harness.kind` = 'invocation'")
    assert inv.info.status == "KILLED" and inv.data.metrics["interrupted"] == 1.0


def _three_cases_to_mlflow(tmp_path, monkeypatch):
    """copy in three dtypes, logged to an sqlite MLflow store, the run cut by a SIGINT (exit 130):
    (the store's uri, the config, the JSONL's records)."""
    import json

    from harness.commands import cli
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cfg, code = _run_with(tmp_path, monkeypatch, None,
                          ["op=copy", "impl=eager", "dtype=[fp32,bf16,fp16]", "shapes=[[7]]", "isolate=false",
                           "sweep=smoke", "device=cpu", "roof.bytes=4194304", f"tracking.uri={uri}"])
    assert code == cli.INTERRUPTED_EXIT
    return uri, cfg, [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]


def test_a_sigint_between_cases_is_handled_as_one_in_a_case(tmp_path, monkeypatch, capsys):
    """A real SIGINT while the second record is written to the JSONL (it waits for the
    write: the record is kept once, whole): the table, every case a record once, the one not
    run skipped, exit 130, and in MLflow one finished case run per record, one point per
    series, nothing RUNNING."""
    import os
    import signal

    from mlflow.tracking import MlflowClient

    from harness.commands import cli
    from harness.records.sinks.jsonl import JsonlSink

    original, calls = JsonlSink.write, []

    def interrupted_second(self, *args):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return original(self, *args)
    monkeypatch.setattr(JsonlSink, "write", interrupted_second)
    uri, cfg, recs = _three_cases_to_mlflow(tmp_path, monkeypatch)
    assert [(r["dtype"], r["status"]) for r in recs] == [("float32", "ok"), ("bfloat16", "ok"),
                                                         ("float16", "skipped")]
    assert recs[2]["reason"] == cli.NOT_RUN
    captured = capsys.readouterr()
    assert "GB/s" in captured.out and (tmp_path / "table.txt").exists()
    assert "before the first case" not in captured.err
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(str(cfg.tracking.experiment))
    from mlflow.entities import ViewType
    every = client.search_runs([exp.experiment_id], "", run_view_type=ViewType.ALL, max_results=1000)
    assert [r.info.run_name for r in every if r.info.status == "RUNNING"] == []
    cases = client.search_runs([exp.experiment_id], "tags.`harness.kind` = 'case'")
    assert sorted(c.data.tags["harness.record_id"] for c in cases) == sorted(r["record_id"] for r in recs)
    (inv,) = client.search_runs([exp.experiment_id], "tags.`harness.kind` = 'invocation'")
    assert inv.info.status == "KILLED"
    for series in client.search_runs([exp.experiment_id], "tags.`harness.kind` = 'series'"):
        steps = [m.step for m in client.get_metric_history(series.info.run_id, "gbps")]
        assert len(steps) == len(set(steps)) == (series.data.tags["dtype"] != "float16")


class _Watched:
    """Events a test waits on across the run's threads (each wait bounded: a failure, not a hang)."""
    WAIT_S = 60

    def __init__(self, *names):
        import threading
        for name in names:
            setattr(self, name, threading.Event())


def _blocked_mlflow(monkeypatch, until):
    """MLflow's store opened and its first record logged only once ``until(stage)`` returns
    ("open", "log"): (the sinks made, the records MLflow logged in order)."""
    from harness.commands import cli
    from harness.records.sinks.mlflow import MlflowLogger
    from harness.records.sinks.mlflow_run import MlflowSink

    made, logged = [], []
    opened, log = MlflowLogger.__init__, MlflowLogger.log

    def open_when_allowed(self, *args, **kwargs):
        until("open")
        opened(self, *args, **kwargs)

    def log_when_allowed(self, rec):
        if not logged:
            until("log")
        logged.append(rec.record_id)
        return log(self, rec)

    class Kept(MlflowSink):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)
    monkeypatch.setattr(MlflowLogger, "__init__", open_when_allowed)
    monkeypatch.setattr(MlflowLogger, "log", log_when_allowed)
    monkeypatch.setattr(cli, "MlflowSink", Kept)
    return made, logged


def test_mlflow_logs_behind_the_cases_and_opens_its_store_while_they_run(tmp_path, monkeypatch):
    """On a GPU each record's logging (40-70 ms to a local store) sat between two cases, and
    the store's opening (MLflow's import, its tables: 5-12 s) before the first. Now a store
    that opens only after the first case ran, and a first record logged only after the third
    case ran, still see every case run and every record logged, the run FINISHED, exit 0."""
    import json

    from mlflow.tracking import MlflowClient

    from harness.run import runner
    ran = _Watched("first", "third")

    def until(stage):
        event = ran.first if stage == "open" else ran.third
        assert event.wait(_Watched.WAIT_S), f"MLflow's {stage} waited for a case that never ran: it held the cases"

    made, logged = _blocked_mlflow(monkeypatch, until)

    class Measured:
        def __init__(self, device, settings):
            self.device, self.settings, self.n = device, settings, 0

        def run(self, spec):
            self.n += 1
            if self.n in (1, 3):
                (ran.first if self.n == 1 else ran.third).set()
            rec = runner.base_record(spec, self.device, self.settings, {})
            rec.status, rec.median_us, rec.timer = "ok", 5.0, "wall"
            return rec

        def stop(self, kill=False):
            pass
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cfg, code = _run_with(tmp_path, monkeypatch, Measured, ["op=copy", "impl=eager", "dtype=fp32",
                                                            "shapes=[[100],[200],[300]]", f"tracking.uri={uri}",
                                                            "device=cpu"])
    assert code == 0 and made[0].note == ""
    recs = [json.loads(line)["record_id"] for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert logged == recs and len(recs) == 3
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(str(cfg.tracking.experiment))
    cases = client.search_runs([exp.experiment_id], "tags.`harness.kind` = 'case'")
    assert sorted(c.data.tags["harness.record_id"] for c in cases) == sorted(recs)
    (inv,) = client.search_runs([exp.experiment_id], "tags.`harness.kind` = 'invocation'")
    assert inv.info.status == "FINISHED"


def test_a_sigint_while_the_run_waits_for_mlflow_keeps_every_record_and_ends_the_runs_killed(tmp_path, monkeypatch,
                                                                                             capsys):
    """MLflow behind by all three records as the run ends, and a SIGINT while the run waits
    for it: every record in the JSONL, MLflow stops after the record it was logging, its runs
    end KILLED (nothing RUNNING), one line says so, the end says how many records were not
    logged and prints the upload command, which uploads them; exit 130."""
    import os
    import signal

    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    from harness.commands import cli
    from harness.records.sinks.mlflow import upload
    from harness.records.sinks.mlflow_run import LOGGING_CUT

    def until(stage):
        if stage == "log":   # the run is waiting for MLflow: a Ctrl-C there
            assert sinks[0].closing.wait(_Watched.WAIT_S)
            os.kill(os.getpid(), signal.SIGINT)
            assert sinks[0].cut.wait(_Watched.WAIT_S)   # taken: this record is the last logged

    sinks, logged = _blocked_mlflow(monkeypatch, until)
    uri, cfg, recs = _three_cases_to_mlflow(tmp_path, monkeypatch)
    assert [r["status"] for r in recs] == ["ok", "ok", "ok"] and logged == [recs[0]["record_id"]]
    out, err = capsys.readouterr()
    assert f"harness: {LOGGING_CUT}; the rest stays in {tmp_path}/results.jsonl" in err
    assert "could not be ended" not in err and "GB/s" in out
    said = f"MLflow: not uploaded ({LOGGING_CUT}; 2 of 3 records not logged). When the store can be opened:"
    assert said in out, out[-1500:]
    assert "harness-upload" in out.split("When the store can be opened:")[1]
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(str(cfg.tracking.experiment))
    every = client.search_runs([exp.experiment_id], "", run_view_type=ViewType.ALL, max_results=1000)
    assert [r.info.run_name for r in every if r.info.status == "RUNNING"] == []
    assert {r.info.status for r in every} == {"KILLED", "FINISHED"}   # the invocation, its series; the case
    (inv,) = client.search_runs([exp.experiment_id], "tags.`harness.kind` = 'invocation'")
    assert inv.info.status == "KILLED"
    from harness.records.sinks import jsonl
    assert upload(jsonl.read(tmp_path / "results.jsonl"), uri, str(cfg.tracking.experiment)) == (2, 1)


def test_a_sigint_mid_cell_keeps_each_impls_finished_processes(tmp_path, monkeypatch, capsys):
    """processes=3, two impls of a shape (one cell) and a second shape: the SIGINT lands in
    round 2 (its order: triton, then eager) at eager. eager keeps round 1, triton rounds 1
    and 2; the second shape's cases are skipped."""
    import json

    from harness.commands import cli

    from harness.run import runner
    calls = []

    class CutInRoundTwo:
        def __init__(self, device, settings):
            self.device, self.settings = device, settings

        def run_fresh(self, spec):
            calls.append((spec.impl, spec.shape))
            if len(calls) == 4:
                raise KeyboardInterrupt
            rec = runner.base_record(spec, self.device, self.settings, {})
            rec.status, rec.median_us, rec.timer = "ok", 5.0 + len(calls) / 10, "cuda_events"
            return rec

        def stop(self, kill=False):
            pass

    cfg, code = _run_with(tmp_path, monkeypatch, CutInRoundTwo,
                          ["op=copy", "impl=[eager,triton]", "dtype=fp32", "shapes=[[100],[200]]",
                           "tracking=none", "device=cpu", "processes=3"])
    assert code == cli.INTERRUPTED_EXIT
    assert calls == [("eager", (100,)), ("triton", (100,)), ("triton", (100,)), ("eager", (100,))]
    recs = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    got = [(r["impl"], r["shape"], r["status"], r["process_medians_us"]) for r in recs]
    assert got == [("eager", [100], "ok", [5.1]), ("triton", [100], "ok", [5.2, 5.3]),
                   ("eager", [200], "skipped", []), ("triton", [200], "skipped", [])]
    assert recs[0]["reason"].startswith("interrupted (SIGINT) after 1 of 3 processes")
    assert recs[1]["reason"].startswith("interrupted (SIGINT) after 2 of 3 processes")
    out = capsys.readouterr().out
    assert "  process 2 of 3: copy triton float32 100: 5.30 us" in out


def test_processes_runs_each_case_in_fresh_workers_and_merges_their_medians(tmp_path):
    proc = harness(tmp_path, "op=copy", "impl=eager", "dtype=fp32", "shapes=[[1000]]", "sweep=smoke",
                   "processes=2", "tracking=none")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (rec,) = results(tmp_path)
    assert rec["status"] == "ok" and rec["processes"] == 2 and len(rec["process_medians_us"]) == 2
    assert (rec["median_lo_us"], rec["median_hi_us"]) == (min(rec["process_medians_us"]),
                                                         max(rec["process_medians_us"]))
    assert "(median of 2 processes: " in proc.stdout
    pids = rec["provenance"]["worker_pids"]   # two processes, neither the harness's own
    assert len(set(pids)) == 2 and all(isinstance(p, int) for p in pids)


def test_a_failing_job_of_a_multirun_does_not_stop_the_others_or_the_summary(tmp_path):
    """strict=true and a job whose cases fail: the next job still runs, the summary still
    comes, and the sweep exits 1 at its end (the planted impl fails its checks)."""
    proc = harness(tmp_path, "-m", "op=copy", "impl=planted,eager", "sweep=smoke", "dtype=fp32", "shapes=[[1000]]",
                   "strict=true", "tracking=none", "isolate=false",
                   env={"HARNESS_PLUGINS": "tests.plugins.planted", "HARNESS_PLANTED_WRONG": "1"})
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "0-impl=planted: 1 FAIL" in proc.stdout and "1-impl=eager: 1 ok" in proc.stdout
    assert "a job exited 1" in proc.stderr


NOISE = ("INFO mlflow", "alembic", "RuntimeWarning", "Warning:", "Traceback")


def test_the_main_command_s_first_run_prints_its_own_lines_and_no_library_s_noise(tmp_path):
    """The main command's first run (a fresh MLflow store and cache; softmax, whose all -inf
    rows make the interpreters' numpy warn): none of MLflow's or alembic's INFO lines, no
    RuntimeWarning, each phase of a case said once (torch.compile compiled again for the
    batch-invariance rows and said so twice), and on a CPU the thread count each case runs
    on, said once and recorded."""
    proc = run_harness(tmp_path, "op=softmax", "impl=all", "dtype=fp32", "shapes=[[2,64]]",
                       f"tracking.uri=sqlite:///{tmp_path}/mlflow.db")
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = proc.stdout + proc.stderr
    assert [n for n in NOISE if n in said] == [], said[-6000:]
    phases = [line for line in said.splitlines() if line.startswith("  ") and ": torch.compile" in line]
    assert phases and len(phases) == len(set(phases)), phases
    recs = results(tmp_path)
    assert recs and all(r["status"] in ("ok", "skipped") for r in recs)
    if not torch.cuda.is_available():
        assert said.count("each case runs on 1 PyTorch thread") == 1
        assert {r["provenance"].get("cpu_threads") for r in recs if r["status"] == "ok"} == {1}


def test_a_full_disk_keeps_every_record_that_fits_ends_the_runs_and_says_which_disk(tmp_path, monkeypatch, capsys):
    """The run folder on a disk that fills after a few records (a 8 KiB tmpfs: root only).
    It was a traceback at the record that did not fit (exit 1), that record a cut line, no
    table, nothing for the cases not run and the MLflow runs left RUNNING. Now: every record
    that fits, whole; the one that did not and the cases not run (skipped, saying why) in the
    table and MLflow; the runs ended FAILED; one line naming the file and the disk; exit 1."""
    import json

    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    from harness.commands import cli

    from harness.run import runner
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(disk)],
                                           capture_output=True).returncode:
        pytest.skip("a small disk needs root to mount a tmpfs")

    class Measured:
        def __init__(self, device, settings):
            self.device, self.settings = device, settings

        def run(self, spec):
            rec = runner.base_record(spec, self.device, self.settings, {})
            rec.status, rec.median_us, rec.timer, rec.reason = "ok", 5.0, "wall", "x" * 500
            return rec

        def stop(self, kill=False):
            pass
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    shapes = ",".join(f"[{100 * (i + 1)}]" for i in range(12))
    try:
        cfg, code = _run_with(disk, monkeypatch, Measured, ["op=copy", "impl=eager", "dtype=fp32", f"shapes=[{shapes}]",
                                                            f"tracking.uri={uri}", "device=cpu"])
        kept = [json.loads(line) for line in (disk / "results.jsonl").read_text().splitlines()]   # each whole
        left = sorted(p.name for p in disk.iterdir())
    finally:
        subprocess.run(["umount", str(disk)], check=True)
    out, err = capsys.readouterr()
    assert code == 1
    assert 1 <= len(kept) < 12 and {r["status"] for r in kept} == {"ok"} and left == ["results.jsonl"]
    said = [line for line in err.splitlines() if line.startswith("harness: error:")]
    assert len(said) == 1 and said[0].startswith(f"harness: error: {disk}/results.jsonl cannot be written: No space "
                                                 f"left on device on the disk mounted at {disk}"), err
    assert f"{len(kept)} of 12 records are in results.jsonl" in said[0]
    assert f"({12 - len(kept) - 1} cases not run)" in said[0]
    assert "Traceback" not in err and "copy · float32" in out
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(str(cfg.tracking.experiment))
    cases = client.search_runs([exp.experiment_id], "tags.`harness.kind` = 'case'", max_results=100)
    assert sorted(c.data.tags["status"] for c in cases) == ["ok"] * (len(kept) + 1) + ["skipped"] * (11 - len(kept))
    assert all(cli.NOT_WRITTEN in c.data.tags["reason"] for c in cases if c.data.tags["status"] == "skipped")
    every = client.search_runs([exp.experiment_id], "", run_view_type=ViewType.ALL, max_results=1000)
    assert [r.info.run_name for r in every if r.info.status == "RUNNING"] == []
    (inv,) = client.search_runs([exp.experiment_id], "tags.`harness.kind` = 'invocation'")
    assert inv.info.status == "FAILED"
