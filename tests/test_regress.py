"""The regression rules on hand-made histories (the end-to-end nightly is tests/test_nightly.py)."""
from harness.records.regress import Point, Thresholds, compare

KEY = ("rmsnorm", "triton", "tuned", "bfloat16", "32768x4096", "NVIDIA H200")
TH = Thresholds(min_effect=0.05, noise_k=2.0, min_abs_us=1.0, history=7)


def pt(median=100.0, spread=0.01, status="ok", passed=True, det=True, when=0, key=KEY, neg=False):
    return Point(key, when, status, passed, det, median, median * (1 - spread / 2), neg, "why", "src")


def history(*medians, **kw):
    return {KEY: [pt(m, when=i * 86_400_000, **kw) for i, m in enumerate(medians)]}


def kinds(items):
    return [f.kind for f in items]


def test_an_unchanged_case_is_quiet():
    rep = compare([pt(101.0)], history(100.0, 99.0, 100.5), TH)
    assert (rep.regressions, rep.improvements, rep.new, rep.vanished) == ([], [], [], []) and rep.compared == 1


def test_a_slowdown_beyond_the_threshold_is_flagged_and_a_speedup_is_an_improvement():
    assert kinds(compare([pt(110.0)], history(100.0), TH).regressions) == ["slowdown"]
    assert kinds(compare([pt(90.0)], history(100.0), TH).improvements) == ["speedup"]


def test_the_threshold_grows_with_the_noise():
    # 8% slower: flagged when runs are tight, not when a run's own spread is 10%
    assert kinds(compare([pt(108.0, spread=0.01)], history(100.0), TH).regressions) == ["slowdown"]
    assert compare([pt(108.0, spread=0.10)], history(100.0), TH).regressions == []
    # the history's own night-to-night scatter counts too
    assert compare([pt(108.0)], history(100.0, 96.0, 104.0), TH).regressions == []


def test_late_samples_do_not_widen_the_threshold():
    """Interference only delays a sample, so the noise is the fast side: a history night whose
    p90 ran to 2.3x its median (late sleeps on a loaded CPU) once hid a planted +184%."""
    from harness.records.record import Record
    from harness.records.regress import point_from_record
    late = point_from_record(Record("rmsnorm", "triton", "tuned", "bfloat16", [32768, 4096], status="ok", passed=True,
                                    deterministic=True, median_us=2148.0, p10_us=2100.0, p90_us=4858.0,
                                    provenance={"gpu_name": "NVIDIA H200"}))
    assert late.key == KEY
    assert kinds(compare([pt(6100.0)], {KEY: [late]}, TH).regressions) == ["slowdown"]
    early = Point(KEY, 0, "ok", True, True, 2148.0, 1074.0)      # half the samples far faster: noisy
    assert compare([pt(4000.0)], {KEY: [early]}, TH).regressions == []


def test_changes_below_the_absolute_floor_are_ignored():
    assert compare([pt(2.8)], history(2.0), TH).regressions == []        # +40%, but 0.8 us
    assert kinds(compare([pt(3.5)], history(2.0), TH).regressions) == ["slowdown"]


def test_correctness_determinism_and_crashes_that_used_to_be_fine():
    assert "correctness" in kinds(compare([pt(passed=False, status="fail")], history(100.0), TH).regressions)
    assert "determinism" in kinds(compare([pt(det=False)], history(100.0), TH).regressions)
    broken = compare([Point(KEY, 0, "crash", None, None, None, None)], history(100.0), TH)
    assert kinds(broken.regressions) == ["broken"]


def test_what_was_already_wrong_is_not_a_regression_and_its_fix_is_an_improvement():
    assert compare([pt(passed=False, status="fail")], history(100.0, passed=False, status="fail"), TH).regressions == []
    assert kinds(compare([pt()], history(100.0, passed=False, status="fail"), TH).improvements) == ["correctness"]
    assert compare([pt(det=False)], history(100.0, det=False), TH).regressions == []


def test_negative_controls_fail_without_being_regressions():
    now = pt(passed=False, status="fail", neg=True)
    assert compare([now], history(100.0, neg=True), TH).regressions == []


def test_new_and_vanished_cases():
    other = ("softmax", "triton", "online", "float32", "4096x4096", "NVIDIA H200")
    rep = compare([pt(key=other)], history(100.0), TH)
    assert kinds(rep.new) == ["new"] and kinds(rep.vanished) == ["vanished"]
    skipped = Point(KEY, 0, "skipped", None, None, None, None, reason="liger is not installed")
    assert kinds(compare([skipped], history(100.0), TH).vanished) == ["now skipped"]


def test_only_the_last_nights_of_history_count():
    nights = history(100.0, 100.0, 100.0, 100.0)
    assert "2 nights" in compare([pt(300.0)], nights, Thresholds(history=2)).regressions[0].detail
    assert "4 nights" in compare([pt(300.0)], nights, Thresholds(history=4)).regressions[0].detail


def test_the_report_lists_regressions_first():
    rep = compare([pt(200.0)], history(100.0), TH)
    text = rep.markdown("night", ["a note"])
    assert text.index("## Regressions (1)") < text.index("## Improvements") < text.index("## New cases") \
        < text.index("## Vanished cases")
    assert "| slowdown | rmsnorm | triton | tuned | bfloat16 | 32768x4096 | NVIDIA H200 |" in text


def test_a_framework_setting_makes_a_series_of_its_own():
    """torch.compile compiled per shape is another peer than one compiled per row length:
    a night that switches modes starts a new series instead of reporting a speedup. A run
    without a series param gets its series from its config params (its framework's declaration)."""
    from types import SimpleNamespace

    from harness.records.record import Record
    from harness.records.regress import point_from_record, point_from_run

    def record(series=""):
        return Record("rmsnorm", "torch_compile", "-", "bfloat16", [32768, 4096], series=series, status="ok",
                      passed=True, median_us=100.0, p10_us=99.0, p90_us=101.0, provenance={"gpu_name": "NVIDIA H200"})

    def run(shapes="static", **series):
        params = {"op": "rmsnorm", "impl": "torch_compile", "variant": "-", "dtype": "bfloat16",
                  "shape": "32768x4096", "config.shapes": shapes, **series}
        return SimpleNamespace(data=SimpleNamespace(params=params, metrics={"median_us": 140.0},
                                                    tags={"gpu": "NVIDIA H200", "status": "ok"}),
                               info=SimpleNamespace(start_time=0, run_id="r"))

    static, dynamic = point_from_record(record("torch_compile[static]")), point_from_record(record())
    assert static.key[1] == "torch_compile[static]" and dynamic.key[1] == "torch_compile"
    assert record("torch_compile[static]").series_key[1] == "torch_compile[static]"   # its own line in MLflow too
    old_static, old_dynamic = point_from_run(run()), point_from_run(run(shapes="dynamic_rows"))
    assert old_static.key == static.key and old_dynamic.key == dynamic.key   # no series param: from config.shapes
    assert point_from_run(run(series="torch_compile")).key == dynamic.key
    assert point_from_run(run(series="torch_compile[static]")).key == static.key
    rep = compare([dynamic], {old_static.key: [old_static]}, TH)
    assert kinds(rep.new) == ["new"] and not rep.improvements and kinds(rep.vanished) == ["vanished"]


def test_a_cpu_time_counts_only_beyond_its_floor_and_an_interpreter_time_never(tmp_path, capsys):
    """A CPU's wall clock moves with the other processes on its cores (eager softmax fp32
    3x1000: 5.1 us alone, 11,958 us beside another process), and an interpreter's time is
    no kernel's: harness-compare called both regressions ("+235091%", exit 1, and a
    one-sample interpreter time)."""
    import json

    from harness.records.compare import main
    from harness.records.record import Record
    from harness.records.regress import CPU_WALL_FLOOR
    cpu = ("softmax", "eager", "-", "float32", "3x1000", "cpu")

    def at(median, timer, spread=0.0):
        return Point(cpu, 0, "ok", True, True, median, median * (1 - spread / 2), timer=timer)
    wall = lambda median: {cpu: [at(median, "wall")]}  # noqa: E731
    assert compare([at(18.0, "wall")], wall(10.0), TH).regressions == []       # +80%: the cores were shared
    assert kinds(compare([at(10.0 * (2 + CPU_WALL_FLOOR), "wall")], wall(10.0), TH).regressions) == ["slowdown"]
    assert kinds(compare([at(10.0, "wall")], wall(18.0), TH).improvements) == []
    interpreted = {cpu: [at(9_000.0, "wall_interpreter")]}
    rep = compare([at(30_000.0, "wall_interpreter")], interpreted, TH)
    assert (rep.regressions, rep.improvements, rep.compared) == ([], [], 1)

    def rec(impl, median, timer, ts):
        return Record("softmax", impl, "-", "float32", [3, 1000], device="cpu", status="ok", timer=timer,
                      median_us=median, p10_us=median, p90_us=median, samples=1, passed=True,
                      deterministic=True, timestamp=ts).as_dict()
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps(r) + "\n" for r in [rec("eager", 5.1, "wall", "2026-12-01"),
                                                        rec("triton", 9_000.0, "wall_interpreter", "2026-12-01")]))
    b.write_text("".join(json.dumps(r) + "\n" for r in [rec("eager", 8.9, "wall", "2026-12-02"),
                                                        rec("triton", 30_000.0, "wall_interpreter", "2026-12-02")]))
    assert main([str(a), str(b)]) == 0
    assert "a CPU's wall-clock time above 100%" in capsys.readouterr().out


def test_two_results_files_compared_case_by_case(tmp_path, capsys):
    """harness-compare: the nightly rule between two runs' files; exit 1 on a regression."""
    import json

    from harness.records.compare import main
    from harness.records.record import Record

    def rec(shape, median, status="ok", ts="2026-12-01T00:00:00+00:00"):
        return Record("copy", "eager", "-", "float32", [shape], status=status, median_us=median,
                      p10_us=median and median * 0.99, p90_us=median and median * 1.01, passed=status == "ok",
                      deterministic=True, timestamp=ts, provenance={"gpu_name": "NVIDIA H200"}).as_dict()
    before = [rec(4096, 10.0), rec(1 << 20, 50.0), rec(1 << 24, 400.0), rec(7, 5.0)]
    after = [rec(4096, 20.0, ts="2026-12-02T00:00:00+00:00"), rec(1 << 20, 50.2, ts="2026-12-02T00:00:00+00:00"),
             rec(1 << 24, None, "error", ts="2026-12-02T00:00:00+00:00"), rec(1 << 28, 6000.0, ts="2026-12-02T00:00:00+00:00")]
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps(r) + "\n" for r in before))
    b.write_text("".join(json.dumps(r) + "\n" for r in after))
    assert main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "| slowdown | copy | eager | - | float32 | 4096 |" in out
    assert "| broken | copy | eager | - | float32 | 16777216 |" in out
    assert "## New cases (1)" in out and "## Vanished cases (1)" in out
    assert "1048576" not in out.split("## Regressions")[1].split("## Improvements")[0]   # 0.4%: noise
    assert main([str(b), str(b)]) == 0
    assert main([str(a), str(tmp_path / "missing.jsonl")]) == 2
    # a published results file also holds devtools/first-run's rows: they are no cases
    (tmp_path / "published.jsonl").write_text(a.read_text() + json.dumps(
        {"kind": "first_run", "op": "copy", "phase": "cold", "seconds": 9.0, "gpu": "NVIDIA H200"}) + "\n")
    assert main([str(tmp_path / "published.jsonl"), str(b)]) == 1


def test_two_mlflow_runs_compared_case_by_case(tmp_path, capsys):
    """harness-compare RUN_ID RUN_ID: each invocation run's case runs, read from MLflow,
    through the same rule; a case or series run id, or an unknown one, is refused (exit 2)."""
    from mlflow.tracking import MlflowClient

    from harness.records.compare import main
    from harness.records.record import Record
    from harness.records.sinks.mlflow import MlflowLogger

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    logger = MlflowLogger(uri, "kernel-harness")

    def run(invocation, medians, ts):
        for shape, median in medians.items():
            logger.log(Record("copy", "eager", "-", "float32", [shape], status="ok", median_us=median,
                              p10_us=median * 0.99, p90_us=median * 1.01, passed=True, deterministic=True,
                              timestamp=ts, invocation_id=invocation, provenance={"gpu_name": "NVIDIA H200"}))
        logger.finish(invocation, [], {})
        return logger._invocations[invocation]
    first = run("night1", {4096: 10.0, 1 << 20: 50.0}, "2026-12-01T00:00:00+00:00")
    second = run("night2", {4096: 20.0, 1 << 20: 50.1}, "2026-12-02T00:00:00+00:00")
    assert main([first, f"runs:/{second}", "--tracking-uri", uri]) == 1
    out = capsys.readouterr().out
    assert "| slowdown | copy | eager | - | float32 | 4096 |" in out and out.count("| slowdown |") == 1
    assert main([second, second, "--tracking-uri", uri]) == 0
    case_run = MlflowClient(uri).search_runs([logger.experiment_id], "tags.`harness.kind` = 'case'")[0]
    assert main([case_run.info.run_id, second, "--tracking-uri", uri]) == 2
    assert "is a case run; give an invocation run" in capsys.readouterr().err
    assert main(["0" * 32, second, "--tracking-uri", uri]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["not-a-run", second, "--tracking-uri", uri]) == 2
    assert "nor an MLflow run id" in capsys.readouterr().err


def test_nightly_finish_refuses_a_missing_folder_or_an_unknown_night_before_uploading(tmp_path, capsys):
    """finish refuses, exit 2, before it uploads anything: a folder that is not there, and a
    night id the tracking server does not have."""
    from harness.commands import nightly
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert nightly.main(["finish", "--out", str(tmp_path / "no-night"), "--tracking-uri", uri]) == 2
    assert f"{tmp_path / 'no-night'}: no such folder; give --out the night's folder" in capsys.readouterr().err
    (tmp_path / "night" / "jobs" / "0").mkdir(parents=True)
    (tmp_path / "night" / "jobs" / "0" / "results.jsonl").write_text("")
    night = "0" * 32
    assert nightly.main(["finish", "--night", night, "--out", str(tmp_path / "night"), "--tracking-uri", uri]) == 2
    assert f"--night {night}: no such run on {uri}; give the id that start printed" in capsys.readouterr().err
    assert not (tmp_path / "night" / "report.md").exists()


def test_nightly_finish_waits_when_the_server_fails_to_look_up_the_night(tmp_path, capsys, monkeypatch):
    """A server error while finish looks up the night's run (not "no such run") is exit 3:
    the records wait for finish to be run again."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from harness.commands import nightly

    def failing(self, run_id):
        raise MlflowException("the database is locked", error_code="INTERNAL_ERROR")
    monkeypatch.setattr(MlflowClient, "get_run", failing)
    (tmp_path / "night" / "jobs" / "0").mkdir(parents=True)
    (tmp_path / "night" / "jobs" / "0" / "results.jsonl").write_text("")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert nightly.main(["finish", "--night", "0" * 32, "--out", str(tmp_path / "night"), "--tracking-uri", uri]) == 3
    assert "did not answer for the night's run (INTERNAL_ERROR" in capsys.readouterr().err


def test_nightly_finish_leaves_out_an_unreadable_job_file_and_uploads_and_compares_the_rest(tmp_path, capsys):
    """One job's results file that cannot be read (a line in its middle is not JSON) is named,
    the other jobs' records are uploaded and compared, the report says what was left out, and
    the exit status is 2."""
    import json

    from mlflow.tracking import MlflowClient

    from harness.commands import nightly
    from harness.records.record import Record
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    night = tmp_path / "night"
    jobs = {}
    for job, op in enumerate(["copy", "scale", "sum"]):
        recs = [Record(op, "eager", "-", "float32", [n], status="ok", median_us=5.0, invocation_id=f"inv{job}",
                       timestamp="2026-12-01T00:00:00+00:00") for n in (7, 4096)]
        lines = [json.dumps(r.as_dict()) for r in recs]
        if job == 1:
            lines.insert(1, "{not json")
        (night / "jobs" / str(job)).mkdir(parents=True)
        jobs[job] = night / "jobs" / str(job) / "results.jsonl"
        jobs[job].write_text("".join(line + "\n" for line in lines))
    assert nightly.main(["finish", "--out", str(night), "--tracking-uri", uri]) == 2
    err = capsys.readouterr().err
    assert f"harness-nightly: {jobs[1]}, line 2: not JSON" in err and "left out, the other files are used" in err
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("kernel-harness").experiment_id
    cases = client.search_runs([exp], "tags.`harness.kind` = 'case'")
    assert sorted(c.data.params["op"] for c in cases) == ["copy", "copy", "sum", "sum"]
    report = (night / "report.md").read_text()
    assert "4 records from 2 jobs" in report and f"left out, unreadable: {jobs[1]}, line 2" in report
    (run,) = client.search_runs([exp], "tags.`harness.kind` = 'night'")
    assert run.info.status == "FAILED" and run.data.metrics["unreadable_files"] == 1


def test_nightly_jobs_refuses_a_plugin_that_does_not_import_with_one_line(tmp_path, capsys, monkeypatch):
    from harness.commands import nightly
    monkeypatch.setenv("HARNESS_PLUGINS", "no_such_team_module")
    assert nightly.main(["jobs", "--out", str(tmp_path), "--tracking-uri", f"sqlite:///{tmp_path}/m.db"]) == 2
    assert capsys.readouterr().err.startswith("harness-nightly: error: HARNESS_PLUGINS names 'no_such_team_module'")
