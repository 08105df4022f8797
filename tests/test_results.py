"""harness.records.results: one page and one JSONL per GPU model, a case measured again replacing its record."""
import json
import math

from harness.records import reader, results
from harness.records.record import Record
from harness.records.sinks.jsonl import JsonlSink

H200 = {"gpu_name": "NVIDIA H200", "gpu_uuid": "GPU-a", "driver": "580.159.04", "torch_cuda": "13.0",
        "versions": {"torch": "2.11.0", "triton": "3.6.0"}, "git_sha": "0123456789abcdef", "git_dirty": False}


def case(impl, shape, gbps, variant="-", status="ok", dtype="bfloat16", when="2026-12-01T10:00:00+00:00",
         run="run-1", gpu=H200, role="ours", roof=4250.0, **extra):
    n = math.prod(shape) * 4
    r = Record(op="rmsnorm", impl=impl, variant=variant, dtype=dtype, shape=list(shape), status=status,
               role=role, device="cuda:0", timer="cuda_events", bytes=n,
               median_us=(n / gbps / 1e3) if gbps else None, gbps=gbps,
               pct_roof=100 * gbps / roof if gbps else None, roof_gbps=roof, roof_kind="copy",
               roof_source="measured cuda_events, copy by copy_", peak_gbps=4800.0,
               provenance=dict(gpu), invocation_id=run, timestamp=when)
    for name, value in extra.items():
        setattr(r, name, value)
    return r


def results_file(path, records, extra_lines=()):
    sink = JsonlSink(path)
    for r in records:
        sink.write(r)
    with open(path, "a") as f:
        f.writelines(line + "\n" for line in extra_lines)
    return path


def saved(folder, name="h200.jsonl"):
    return [json.loads(line) for line in (folder / name).read_text().splitlines()]


def test_a_case_measured_again_replaces_its_record_and_the_other_cases_stay(tmp_path):
    out = tmp_path / "results"
    first = results_file(tmp_path / "a.jsonl", [case("triton", (16, 4096), 50.0), case("eager", (16, 4096), 30.0)])
    assert results.main([str(first), "--dir", str(out)]) == 0
    again = results_file(tmp_path / "b.jsonl", [case("triton", (16, 4096), 60.0, when="2026-12-02T10:00:00+00:00",
                                                     run="run-2")])
    assert results.main([str(again), "--dir", str(out)]) == 0
    rows = {(r["impl"], r["invocation_id"]): r["gbps"] for r in saved(out)}
    assert rows == {("triton", "run-2"): 60.0, ("eager", "run-1"): 30.0}


def test_a_case_that_did_not_run_keeps_its_measured_record_but_a_failure_replaces_it(tmp_path, capsys):
    """A run cut by an interrupt, or without a framework, publishes what it measured and loses
    nothing: its skipped and cut cases leave the measured records in place; a case that ran and
    failed does replace its record (that is news)."""
    from harness.records.record import INTERRUPTED
    out = tmp_path / "results"
    first = results_file(tmp_path / "a.jsonl", [case("triton", (16, 4096), 50.0), case("eager", (16, 4096), 30.0),
                                                case("cuda", (16, 4096), 40.0)])
    assert results.main([str(first), "--dir", str(out)]) == 0
    later = dict(when="2026-12-02T10:00:00+00:00", run="run-2")
    again = results_file(tmp_path / "b.jsonl", [
        case("triton", (16, 4096), None, status="skipped", reason="the run was interrupted (SIGINT) before this case",
             **later),
        case("eager", (16, 4096), None, status="error", reason=INTERRUPTED, **later),
        case("cuda", (16, 4096), None, status="error", reason="CUDA error: an illegal memory access", **later),
        case("cuda", (8, 4096), None, status="skipped", reason="no nvcc", **later)])
    assert results.main([str(again), "--dir", str(out)]) == 0
    rows = {(r["impl"], tuple(r["shape"])): (r["status"], r["invocation_id"]) for r in saved(out)}
    assert rows == {("triton", (16, 4096)): ("ok", "run-1"), ("eager", (16, 4096)): ("ok", "run-1"),
                    ("cuda", (16, 4096)): ("error", "run-2"), ("cuda", (8, 4096)): ("skipped", "run-2")}
    assert "2 cases that did not run this time keep their measured records" in capsys.readouterr().out
    # two files at once, the later one cut: the earlier one's measurement is what is published
    out2 = tmp_path / "results2"
    assert results.main([str(first), str(again), "--dir", str(out2)]) == 0
    assert {(r["impl"], tuple(r["shape"])): r["status"] for r in saved(out2)} == {
        ("triton", (16, 4096)): "ok", ("eager", (16, 4096)): "ok", ("cuda", (16, 4096)): "error",
        ("cuda", (8, 4096)): "skipped"}


def test_an_older_record_fed_again_does_not_displace_the_latest(tmp_path):
    out = tmp_path / "results"
    new = results_file(tmp_path / "new.jsonl", [case("triton", (16, 4096), 60.0, when="2026-12-02T10:00:00+00:00")])
    old = results_file(tmp_path / "old.jsonl", [case("triton", (16, 4096), 50.0)])
    assert results.main([str(new), str(old), "--dir", str(out)]) == 0
    assert results.main([str(old), "--dir", str(out)]) == 0
    assert [r["gbps"] for r in saved(out)] == [60.0]


def test_a_series_setting_keeps_its_own_case(tmp_path):
    """torch_compile compiled per shape is not the one compiled once per row length: one
    does not replace the other."""
    out = tmp_path / "results"
    f = results_file(tmp_path / "a.jsonl", [
        case("torch_compile", (16, 4096), 40.0, role="peer"),
        case("torch_compile", (16, 4096), 45.0, role="peer", series="torch_compile[static]",
             when="2026-12-02T10:00:00+00:00")])
    assert results.main([str(f), "--dir", str(out)]) == 0
    assert sorted(r["gbps"] for r in saved(out)) == [40.0, 45.0]
    assert "| torch_compile[static] | peer |" in (out / "h200.md").read_text()


def test_one_file_pair_per_gpu_model_and_none_per_run(tmp_path):
    out = tmp_path / "results"
    h100 = {**H200, "gpu_name": "NVIDIA H100 80GB HBM3"}
    for n in range(3):
        f = results_file(tmp_path / f"run{n}.jsonl", [case("triton", (16, 4096), 50.0 + n, run=f"run-{n}"),
                                                      case("triton", (16, 4096), 40.0, run=f"run-{n}", gpu=h100)])
        assert results.main([str(f), "--dir", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["h100-80gb-hbm3.jsonl", "h100-80gb-hbm3.md",
                                                     "h200.jsonl", "h200.md"]
    assert len(saved(out)) == 1 and len(saved(out, "h100-80gb-hbm3.jsonl")) == 1
    assert (out / "h100-80gb-hbm3.md").read_text().startswith("# NVIDIA H100 80GB HBM3\n")


def test_the_page_orders_shapes_by_size_and_the_jsonl_by_op_dtype_size_impl(tmp_path):
    out = tmp_path / "results"
    f = results_file(tmp_path / "a.jsonl", [
        case("triton", (16384, 8192), 4000.0), case("triton", (16, 4096), 50.0), case("eager", (16384, 8192), 2000.0),
        case("triton", (1823, 781), 700.0), case("eager", (16, 4096), 30.0),
        case("triton", (16, 4096), 40.0, dtype="float32")])
    assert results.main([str(f), "--dir", str(out)]) == 0
    page = (out / "h200.md").read_text()
    assert "| impl | role | 16x4096 | 1823x781 | 16384x8192 |" in page   # as numbers, not as text
    assert page.index("## rmsnorm · bfloat16") < page.index("## rmsnorm · float32")
    order = [(r["dtype"], r["shape"], r["impl"]) for r in saved(out)]
    assert order == [("bfloat16", [16, 4096], "eager"), ("bfloat16", [16, 4096], "triton"),
                     ("bfloat16", [1823, 781], "triton"), ("bfloat16", [16384, 8192], "eager"),
                     ("bfloat16", [16384, 8192], "triton"), ("float32", [16, 4096], "triton")]


def test_each_cell_gives_time_rate_and_a_status_where_the_case_did_not_pass(tmp_path):
    out = tmp_path / "results"
    invalid = case("cuda", (16, 4096), None, status="invalid", role="ours", median_us=0.5)
    f = results_file(tmp_path / "a.jsonl", [
        case("triton", (32768, 4096), 4250.0), case("liger", (32768, 4096), 4000.0, status="fail", role="peer"),
        case("eager", (32768, 4096), None, status="skipped", role="peer", reason="not installed"), invalid])
    assert results.main([str(f), "--dir", str(out)]) == 0
    page = (out / "h200.md").read_text()
    assert "| triton | ours |  | 126 us · 4250 (100%) |" in page
    assert "| liger | peer |  | 134 us · 4000 (94%) FAIL |" in page
    assert "| eager | peer |  | skipped |" in page
    assert "| cuda | ours | 0.5 us INVALID |  |" in page   # its time kept, no bandwidth claimed


def test_the_page_opens_with_the_roof_the_peak_and_the_provenance(tmp_path):
    out = tmp_path / "results"
    later = {**H200, "gpu_uuid": "GPU-b", "git_sha": "fedcba9876543210"}
    f = results_file(tmp_path / "a.jsonl", [
        case("triton", (16, 4096), 50.0),
        case("triton", (32768, 4096), 4250.0, roof=4290.0, run="run-2", gpu=later, when="2026-12-03T09:00:00+00:00")])
    assert results.main([str(f), "--dir", str(out)]) == 0
    page = (out / "h200.md").read_text()
    assert page.startswith("# NVIDIA H200\n")
    head = page.split("\n## Measured on\n")[1].split("\n## ")[0]
    assert "**Roof**: copy 4270 GB/s (the median of 2 runs, from 4250 to 4290), set by copy_ (2 runs)" in head
    assert "**Datasheet peak**: 4800 GB/s" in head
    assert "NVIDIA H200, 2 of them (by gpu_uuid); driver 580.159.04; CUDA 13.0" in head
    assert "torch 2.11.0, triton 3.6.0" in head
    assert "0123456789ab (1), fedcba987654 (1)" in head
    assert "2026-12-01 to 2026-12-03, 2 cases in 2 runs" in head


def test_cpu_records_are_refused_for_the_page_with_the_reason(tmp_path, capsys):
    out = tmp_path / "results"
    cpu = case("triton", (16, 4096), None, gpu={"gpu_name": None}, device="cpu", timer="wall_interpreter",
               median_us=9000.0)
    only_cpu = results_file(tmp_path / "cpu.jsonl", [cpu])
    assert results.main([str(only_cpu), "--dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert "left out 1 records measured on a CPU" in err and "no GPU measurements to publish" in err
    assert not out.exists()
    mixed = results_file(tmp_path / "mixed.jsonl", [cpu, case("triton", (16, 4096), 50.0)])
    assert results.main([str(mixed), "--dir", str(out)]) == 0
    assert "measured on a CPU" in capsys.readouterr().err
    assert [r["device"] for r in saved(out)] == ["cuda:0"]


def test_lines_that_are_not_case_records_are_skipped_and_counted(tmp_path, capsys):
    nvbench_row = json.dumps({"op": "copy", "impl": "eager", "variant": "-", "dtype": "bfloat16", "shape": [4096],
                              "harness_median_us": 4.4, "nvbench_cold_median_us": 4.5})
    f = results_file(tmp_path / "a.jsonl", [case("triton", (16, 4096), 50.0)], [nvbench_row, nvbench_row])
    assert results.main([str(f), "--dir", str(tmp_path / "results")]) == 0
    assert "skipped 2 lines that are not case records" in capsys.readouterr().out
    assert len(saved(tmp_path / "results")) == 1


def test_bad_input_exits_2_with_a_message_naming_the_problem(tmp_path, capsys):
    out = ["--dir", str(tmp_path / "results")]
    assert results.main([str(tmp_path / "missing.jsonl"), *out]) == 2
    assert "missing.jsonl: no such file" in capsys.readouterr().err
    garbled = tmp_path / "garbled.jsonl"
    garbled.write_text(json.dumps(case("triton", (16, 4096), 50.0).as_dict()) + "\n{not json\n")
    assert results.main([str(garbled), *out]) == 2
    assert "garbled.jsonl, line 2: not JSON" in capsys.readouterr().err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert results.main([str(empty), *out]) == 2
    assert "no GPU measurements to publish: the files hold 0 case records" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


def test_a_gpu_name_becomes_a_short_file_name():
    assert results.slug("NVIDIA H200") == "h200"
    assert results.slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"


def test_records_naming_no_gpu_are_left_out_and_counted(tmp_path, capsys):
    """A run interrupted leaves its unfinished cases with no provenance: no GPU page can hold them."""
    unfinished = case("eager", (16, 4096), None, status="skipped", gpu={}, device="", timer="",
                      reason="the run was interrupted (SIGINT) before this case")   # as a stopped case is
    f = results_file(tmp_path / "a.jsonl", [case("triton", (16, 4096), 50.0), unfinished])
    assert results.main([str(f), "--dir", str(tmp_path / "results")]) == 0
    said = capsys.readouterr().out
    assert "left out 1 records that name no GPU" in said and "CPU" not in said
    assert [r["impl"] for r in saved(tmp_path / "results")] == ["triton"]


def first_run(op, phase, seconds, when, gpu="NVIDIA H200", cut=False, **more):
    return json.dumps({"kind": "first_run", "op": op, "phase": phase, "seconds": seconds, "cut": cut, "cases": 84,
                       "gpu": gpu, "commit": "abc", "when": when, **more})


def test_first_runs_are_kept_beside_the_cases_the_latest_per_op_and_phase_and_shown_summed(tmp_path):
    out = tmp_path / "results"
    a = results_file(tmp_path / "a.jsonl", [case("triton", (16, 4096), 50.0)],
                     [first_run("rmsnorm", "cold", 300.0, "2026-12-01T10:00:00Z"),
                      first_run("rmsnorm", "warm", 100.0, "2026-12-01T10:05:00Z")])
    assert results.main([str(a), "--dir", str(out)]) == 0
    b = tmp_path / "b.jsonl"   # first runs alone, from another call: one replaces, one adds, a cut one
    b.write_text("\n".join([first_run("rmsnorm", "cold", 200.0, "2026-12-02T10:00:00Z"),
                            first_run("rmsnorm", "cold", 900.0, "2026-11-30T10:00:00Z"),   # older: ignored
                            first_run("softmax", "cold", 150.0, "2026-12-02T10:10:00Z", cut=True, not_run=30,
                                      tree="0123456789abcdef0123")]) + "\n")
    assert results.main([str(b), "--dir", str(out)]) == 0
    rows = saved(out)
    assert sum(1 for r in rows if r.get("kind") != "first_run") == 1   # the case stays
    kept = {(r["op"], r["phase"]): r["seconds"] for r in rows if r.get("kind") == "first_run"}
    assert kept == {("rmsnorm", "cold"): 200.0, ("rmsnorm", "warm"): 100.0, ("softmax", "cold"): 150.0}
    page = (out / "h200.md").read_text()
    assert "## First runs" in page
    assert "| rmsnorm | 84 | 200 | 100 | off | 2026-12-02 abc |" in page
    assert "| softmax | 84 | 150+ (54 of 84 cases) |  | off | 2026-12-02 tree 0123456789ab |" in page
    assert "MLflow `off`" in page
    assert "| these 2 summed | | 350+ | 100 (1 of 2 ops) |" in page and "cut by its time limit" in page
    c = tmp_path / "c.jsonl"
    c.write_text(first_run("softmax", "warm", 90.0, "2026-12-02T10:20:00Z") + "\n")
    assert results.main([str(c), "--dir", str(out)]) == 0
    page = (out / "h200.md").read_text()
    assert "| softmax | 84 | 150+ (54 of 84 cases) | 90 |" in page
    # the cold and warm runs ran other files: each is named
    assert "| off | cold 2026-12-02 tree 0123456789ab, warm 2026-12-02 abc |" in page


def test_a_first_run_says_whether_it_logged_to_mlflow():
    lines = results.first_run_table([json.loads(first_run("copy", "cold", 20.0, "2026-12-02T10:00:00Z",
                                                          tracking="local"))])
    assert "| copy | 84 | 20 |  | local | 2026-12-02 abc |" in lines
    assert not any("MLflow `off`" in line for line in lines)


def test_first_run_lines_that_cannot_be_placed_are_left_out_and_said(tmp_path, capsys):
    f = tmp_path / "a.jsonl"
    no_gpu = json.loads(first_run("rmsnorm", "cold", 30.0, "2026-12-02T10:00:00Z"))
    no_gpu["gpu"] = None   # cut before its first record
    no_phase = json.loads(first_run("softmax", "cold", 30.0, "2026-12-02T10:00:00Z"))
    del no_phase["phase"]
    f.write_text("\n".join([first_run("rmsnorm", "warm", 90.0, "2026-12-02T10:05:00Z"), json.dumps(no_gpu),
                            json.dumps(no_phase)]) + "\n")
    assert results.main([str(f), "--dir", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    assert "left out 2 first-run lines" in out and "not case records" not in out
    assert [r["seconds"] for r in saved(tmp_path / "results")] == [90.0]


def test_a_damaged_record_is_named_by_line_and_field_and_every_reader_reads_the_rest(tmp_path, capsys):
    """A record without its record_id is read (its id made from the line, so an upload of the
    file again finds it), one with a field of the wrong type is left out; each named with its
    line and field on stderr, by the one reader every tool uses: harness-report,
    harness-results, harness-compare and harness-results summary, none with a traceback."""
    from harness.records import compare, report
    good = [case("triton", (16, 4096), 50.0), case("liger", (16, 4096), 40.0, role="peer"),
            case("triton", (32, 4096), 50.0), case("liger", (32, 4096), 45.0, role="peer")]
    rows = [r.as_dict() for r in good]
    del rows[1]["record_id"]
    rows[2]["shape"] = "4096x4096"
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text("".join(json.dumps(r) + "\n" for r in rows))
    said = (f"{damaged}, line 2: no record_id: read, its id made from the line",
            f'{damaged}, line 3: shape is "4096x4096", not a list of whole numbers: left out')
    said_in = lambda err: all(s in err for s in said)  # noqa: E731

    records, _ = reader.read(damaged)
    assert [(r.impl, r.shape) for r in records] == [("triton", [16, 4096]), ("liger", [16, 4096]),
                                                    ("liger", [32, 4096])]
    assert records[1].record_id == reader.read(damaged)[0][1].record_id != ""   # the same id each time
    assert said_in(capsys.readouterr().err)

    assert report.main([str(damaged), "--out", str(tmp_path / "report")]) == 0
    assert said_in(capsys.readouterr().err)
    assert results.main([str(damaged), "--dir", str(tmp_path / "published")]) == 0
    assert said_in(capsys.readouterr().err) and len(saved(tmp_path / "published")) == 3
    assert compare.main([str(damaged), str(damaged)]) == 0
    assert said_in(capsys.readouterr().err)
    assert results.main(["summary", str(damaged)]) == 0
    out, err = capsys.readouterr()
    assert said_in(err) and "| rmsnorm | bfloat16 | 16x4096 | triton 50 GB/s |" in out


def test_a_record_without_its_series_gets_it_from_its_impl_config_and_it_is_said(tmp_path, capsys):
    """A line that does not name its series: its framework's declaration says which of the
    settings in its impl_config make one, so a static torch.compile stays its own series."""
    rows = []
    for shapes in ("static", "dynamic_rows"):
        row = case("torch_compile", (16, 4096), 45.0, role="peer", impl_config={"shapes": shapes}).as_dict()
        del row["series"]
        rows.append(json.dumps(row))
    old = tmp_path / "old.jsonl"
    old.write_text("\n".join(rows) + "\n")
    assert [r.series for r in reader.read(old)[0]] == ["torch_compile[static]", "torch_compile"]
    assert f"{old}, line 1: no series: its series read from its impl_config" in capsys.readouterr().err


def test_a_page_s_own_data_with_a_damaged_record_is_refused_not_rewritten_without_it(tmp_path, capsys):
    out = tmp_path / "results"
    assert results.main([str(results_file(tmp_path / "a.jsonl", [case("triton", (16, 4096), 50.0)])),
                         "--dir", str(out)]) == 0
    data = out / "h200.jsonl"
    row = json.loads(data.read_text())
    row["median_us"] = "fast"
    data.write_text(json.dumps(row) + "\n")
    assert results.main([str(results_file(tmp_path / "b.jsonl", [case("eager", (16, 4096), 30.0)])),
                         "--dir", str(out)]) == 2
    assert f'{data}, line 1: a damaged record: median_us is "fast", not a number or null' in capsys.readouterr().err
    assert json.loads(data.read_text())["median_us"] == "fast"


def test_a_phase_no_op_measured_sums_to_nothing_not_zero():
    """Cold runs alone (a GPU call's time went to them): the warm column's sum read 0."""
    lines = results.first_run_table([json.loads(first_run(op, "cold", 20.0, "2026-12-02T10:00:00Z", "NVIDIA H200"))
                                     for op in ("copy", "softmax")])
    assert "| these 2 summed | | 40 |  | | |" in lines
