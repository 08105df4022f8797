"""harness.records.report: the plots (their content, not only their files) and the self-contained report."""
import math

import matplotlib.colors

from harness.records import report
from harness.records.record import Record


def case(impl, shape, gbps, variant="-", status="ok", pct=None, control=False, dtype="bfloat16", roof=4000.0):
    n = math.prod(shape) * 4
    return Record(op="rmsnorm", impl=impl, variant=variant, dtype=dtype, shape=list(shape), status=status,
                  bytes=n, median_us=(n / gbps / 1e3) if gbps else None, gbps=gbps,
                  pct_roof=pct if pct is not None else (100 * gbps / roof if gbps else None),
                  roof_gbps=roof, roof_kind="mix", peak_gbps=4800.0, negative_control=control,
                  provenance={"gpu_name": "NVIDIA H200"}, device="cuda:0")


def cases():
    return [case("eager", (16, 4096), 800.0), case("eager", (32768, 4096), 3500.0),
            case("eager", (8192, 16384), 2500.0),
            case("triton", (16, 4096), 900.0), case("triton", (32768, 4096), 4300.0),
            case("triton", (8192, 16384), 4250.0),
            case("liger", (32768, 4096), None, status="fail"),
            case("triton", (32768, 4096), 4200.0, variant="unsafe", control=True, status="fail")]


def test_the_bandwidth_plot_has_a_line_per_impl_the_roof_and_a_log_x_axis():
    fig = report.bandwidth_plot("rmsnorm", "bfloat16", cases())
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_ylabel() == "GB/s"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    # the failed liger and the negative control are not plotted; the roof and the peak are
    assert legend == ["eager", "triton", "roof (mix)", "datasheet peak"]
    lines = {line.get_label(): line for line in ax.get_lines()}
    # 32768x4096 and 8192x16384 move the same bytes: the line joins their median
    assert list(lines["triton"].get_ydata()) == [900.0, (4300.0 + 4250.0) / 2]
    assert list(lines["roof (mix)"].get_ydata()) == [4000.0, 4000.0]


def test_the_roof_heatmap_is_impl_by_shape_and_names_what_has_no_rate():
    fig = report.roof_heatmap("rmsnorm", "bfloat16", cases())
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["eager", "liger", "triton", "triton/unsafe"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["16x4096", "8192x16384", "32768x4096"]
    texts = {t.get_text() for t in ax.texts}
    assert {"FAIL", "xfail", "108", "22"} <= texts   # 4300 of 4000: 108%; a failure and a control named


def test_nothing_timed_draws_nothing():
    recs = [case("eager", (16, 4096), None, status="error")]
    assert report.bandwidth_plot("rmsnorm", "bfloat16", recs) is None
    assert report.roof_heatmap("rmsnorm", "bfloat16", recs) is None


def test_the_report_is_one_self_contained_file_with_tables_and_plots(tmp_path):
    recs = cases() + [case("eager", (4096, 4096), 3000.0, dtype="float32")]
    paths = report.write(recs, tmp_path, "harness op=rmsnorm")
    assert paths[0] == tmp_path / "report.html"
    assert sorted(p.name for p in paths[1:]) == ["rmsnorm-bfloat16-gbps.png", "rmsnorm-bfloat16-roof.png",
                                                 "rmsnorm-float32-gbps.png", "rmsnorm-float32-roof.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in paths[1:])
    text = paths[0].read_text()
    assert "src=\"plots/" not in text and text.count("data:image/png;base64,") == 4   # nothing outside the file
    assert "<th>GB/s (% of roof)</th>" in text and "4300 (108%)" in text and "NVIDIA H200" in text
    assert "rmsnorm · float32 · NVIDIA H200" in text and "Every case" in text


def test_the_latest_record_of_a_case_wins():
    old, new = case("eager", (16, 4096), 100.0), case("eager", (16, 4096), 200.0)
    old.timestamp, new.timestamp = "2026-01-01", "2026-02-01"
    (group,) = report.groups([new, old]).values()
    assert [r.gbps for r in group] == [200.0]


def test_the_command_rebuilds_a_report_from_results_files(tmp_path, capsys):
    from harness.records.sinks.jsonl import JsonlSink
    sink = JsonlSink(tmp_path / "a" / "results.jsonl")
    for r in cases():
        sink.write(r)
    assert report.main([str(sink.path), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "report.html").exists() and len(list((tmp_path / "out" / "plots").iterdir())) == 2
    assert report.main([str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_a_failed_case_shows_its_status_not_a_rate_in_the_heatmap():
    """A case that failed its checks keeps its timing, but the heatmap must not colour it
    as a result: it names the failure."""
    recs = cases()
    recs[0].status = "fail"   # eager 16x4096, timed at 800 GB/s
    ax = report.roof_heatmap("rmsnorm", "bfloat16", recs).axes[0]
    row = [t for t in ax.texts if t.get_position()[1] == 0]   # eager's row
    assert [t.get_text() for t in sorted(row, key=lambda t: t.get_position()[0])][0] == "FAIL"


def test_the_command_reads_a_published_results_file_beside_its_first_run_lines(tmp_path, capsys):
    """docs/results/<gpu>.jsonl keeps devtools/first-run's timings after its records: they are
    no cases, and the report is drawn from the records (every other reader of the file reads it)."""
    from pathlib import Path
    lines = (Path(__file__).resolve().parent.parent / "docs" / "results" / "h200.jsonl").read_text().splitlines()
    first_runs = [line for line in lines if '"kind": "first_run"' in line]
    published = tmp_path / "h200.jsonl"
    published.write_text("\n".join([line for line in lines if line not in first_runs][:4] + first_runs) + "\n")
    assert first_runs and report.main([str(published), "--out", str(tmp_path / "out")]) == 0, capsys.readouterr().err
    assert "not a harness record" not in capsys.readouterr().err and (tmp_path / "out" / "report.html").exists()


def test_a_status_is_red_only_where_something_went_wrong_and_a_cached_rate_keeps_its_mark():
    """report.html styled `ok` (an interpreter's case, no rate) red like `skipped`, and its
    GB/s cells dropped the `c` the time column gives a CPU case that sits in the CPU's cache."""
    interpreted = case("triton", (16, 4096), None)
    interpreted.timer, interpreted.median_us, interpreted.device = "wall_interpreter", 9000.0, "cpu"
    cached = case("eager", (16, 4096), 6.7)
    cached.timer, cached.device, cached.provenance = "wall", "cpu", {"cpu_cache_bytes": 32 << 20}
    skipped = case("cuda", (16, 4096), None, status="skipped")
    failed = case("liger", (16, 4096), None, status="fail")
    control = case("eager", (16, 4096), None, variant="unsafe", status="fail", control=True)
    cells = {r.impl_label: report._cell(r) for r in (interpreted, cached, skipped, failed, control)}
    assert cells["triton"] == '<span class="quiet">ok</span>'
    assert cells["cuda"] == '<span class="quiet">skipped</span>'
    assert cells["eager/unsafe"] == '<span class="quiet">xfail</span>'
    assert cells["liger"] == '<span class="bad">FAIL</span>'
    assert cells["eager"].startswith("6.7") and '<span class="mark">c</span>' in cells["eager"]
    page = report.table([interpreted, cached, skipped, failed, control])
    assert page.count('class="bad"') == 1 and "6.7" in page


def test_a_plot_of_more_series_than_colours_tells_each_apart():
    """More than ten impls and variants (rmsnorm has up to 20): the eleventh took the first's
    blue (triton and cuda/naive)."""
    recs = [case(f"impl{i:02d}", shape, 100.0 + i) for i in range(23) for shape in ((16, 4096), (32768, 4096))]
    ax = report.bandwidth_plot("rmsnorm", "bfloat16", recs).axes[0]
    series = [line for line in ax.get_lines() if line.get_label().startswith("impl")]
    assert len(series) == 23
    looks = {(matplotlib.colors.to_hex(line.get_color()), line.get_linestyle()) for line in series}
    assert len(looks) == 23
