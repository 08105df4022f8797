"""harness-results summary: which records it compares and what it prints."""
import json
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OURS = {"triton", "cuda", "cupy", "numba"}   # the frameworks' declared roles, as the runner records them
# the console script harness-results, as pyproject's [project.scripts] makes it
COMMAND = [sys.executable, "-c", "import sys; from harness import entry; sys.exit(entry.results())", "summary"]


def rec(impl, gbps, variant="-", status="ok", shape=(16, 4096), dtype="bfloat16", ts="2026-11-29T10:00:00",
        **extra):
    return {"op": "rmsnorm", "impl": impl, "variant": variant, "dtype": dtype, "shape": list(shape), "series": impl,
            "record_id": uuid.uuid4().hex, "role": "ours" if impl in OURS else "peer",
            "bytes": shape[0] * shape[1] * 4, "gbps": gbps, "pct_roof": gbps and gbps / 43, "status": status,
            "timestamp": ts, "impl_config": {}, "provenance": {"gpu_uuid": "GPU-a"}, **extra}


def run(tmp_path, records, *args):
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return subprocess.run([*COMMAND, str(path), *args], capture_output=True, text=True, timeout=60)


def summarize(tmp_path, records, *args):
    proc = run(tmp_path, records, *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_latest_record_wins_and_failed_or_control_records_are_not_compared(tmp_path):
    records = [rec("triton", 50), rec("triton", 40, ts="2026-11-29T11:00:00"),   # measured again: 40 counts
               rec("torch_compile", 45), rec("liger", 90, status="fail"),           # a failed peer: not a peer
               rec("triton", 99, variant="unsafe", negative_control=True)]           # a control: not ours
    out = summarize(tmp_path, records)
    assert "| rmsnorm | bfloat16 | 16x4096 | triton 40 GB/s |" in out and "torch_compile 45 GB/s" in out
    assert "| 0.889 |" in out and "liger" not in out and "unsafe" not in out


def test_the_matrix_has_a_column_per_dtype_and_marks_what_is_behind(tmp_path):
    records = [rec("triton", 50), rec("torch_compile", 40), rec("triton", 30, dtype="float32"),
               rec("torch_compile", 60, dtype="float32"), rec("triton", 20, dtype="float16"),
               rec("triton", 10, shape=(4096, 4096)), rec("torch_compile", 10, shape=(4096, 4096))]
    out = summarize(tmp_path, records, "--matrix", "--max-bytes", str(4096 * 4096 * 4))
    lines = out.splitlines()
    assert lines[0] == "| op | shape | bfloat16 | float16 | float32 |"
    assert lines[2] == "| rmsnorm | 16x4096 | 1.250 | - | **0.500** |"   # fp16: no peer ran
    assert len(lines) == 3   # 4096x4096 moves --max-bytes: left out


def test_a_ratio_resting_on_a_short_record_of_the_old_timer_is_marked(tmp_path):
    """No spin_us (timed before the timer's lead followed the host) and under 100 us: the
    ratio carries a mark and the table a note; timed since, or long, no mark."""
    records = [rec("triton", 50, median_us=5.0, spin_us=280.0), rec("liger", 40, median_us=6.0),
               rec("triton", 50, dtype="float32", median_us=5.0, spin_us=280.0),
               rec("liger", 40, dtype="float32", median_us=6.0, spin_us=600.0),
               rec("triton", 50, shape=(32768, 4096), median_us=130.0), rec("liger", 40, shape=(32768, 4096),
                                                                            median_us=160.0)]
    out = summarize(tmp_path, records, "--matrix")
    assert "| rmsnorm | 16x4096 | 1.250† | 1.250 |" in out and "| rmsnorm | 32768x4096 | 1.250 |  |" in out
    assert "old fixed lead" in out
    out = summarize(tmp_path, records[2:], "--matrix")
    assert "†" not in out and "old fixed lead" not in out
    assert "| 1.250† |" in summarize(tmp_path, records[:2])


def test_a_ratio_whose_median_intervals_overlap_is_marked_as_unresolved(tmp_path):
    """Overlapping 95% intervals: the ratio is marked whichever way it points, with a note;
    disjoint intervals, or records without intervals, are not."""
    def timed(impl, gbps, lo, hi, **kw):
        return rec(impl, gbps, median_us=(lo + hi) / 2, spin_us=300.0, median_lo_us=lo, median_hi_us=hi, **kw)
    records = [timed("triton", 99, 4.70, 4.74), timed("liger", 100, 4.67, 4.71),                  # overlap
               timed("triton", 97, 6.96, 7.00, dtype="float16"), timed("liger", 100, 6.80, 6.84, dtype="float16"),
               rec("triton", 99, dtype="float32", median_us=5.0, spin_us=300.0), rec("liger", 100, dtype="float32",
                                                                                     median_us=5.0, spin_us=300.0)]
    out = summarize(tmp_path, records, "--matrix")
    assert "| rmsnorm | 16x4096 | **0.990**≈ | **0.970** | **0.990** |" in out
    assert "intervals overlap" in out
    assert "| 0.990≈ |" in summarize(tmp_path, records[:2])
    assert "≈" not in summarize(tmp_path, records[2:])


def test_each_case_shows_its_sustained_percent_of_roof_where_it_was_timed_so(tmp_path):
    records = [rec("triton", 50, pct_roof_sustained=97.25), rec("torch_compile", 45)]   # the peer: an older record
    out = summarize(tmp_path, records)
    assert "| 1.111 | 97.2, - |" in out


def test_a_ratio_of_records_from_two_gpus_is_marked(tmp_path):
    """Records from two GPUs (gpu_uuid), or one naming none, carry a mark and the table a
    note; both from one GPU, none."""
    records = [rec("triton", 50), rec("liger", 40, provenance={"gpu_uuid": "GPU-b"}),
               rec("triton", 50, dtype="float32"), rec("liger", 40, dtype="float32", provenance={}),
               rec("triton", 50, dtype="float16"), rec("liger", 40, dtype="float16")]
    out = summarize(tmp_path, records, "--matrix")
    assert "| rmsnorm | 16x4096 | 1.250‡ | 1.250 | 1.250‡ |" in out and "different GPUs" in out
    assert "‡" not in summarize(tmp_path, records[4:])


def test_same_gpu_compares_each_case_on_the_gpu_where_both_last_ran(tmp_path):
    """--same-gpu: Triton measured again on another GPU without its peers does not displace
    the last comparison made on one GPU; of two GPUs with both, the later comparison counts;
    a case never compared on one GPU is left out."""
    a, b, c = ({"gpu_uuid": g} for g in ("GPU-a", "GPU-b", "GPU-c"))
    records = [rec("triton", 50, provenance=a), rec("liger", 40, provenance=a),
               rec("triton", 30, provenance=b, ts="2026-11-29T12:00:00"),                    # alone on b
               rec("triton", 60, dtype="float32", provenance=a), rec("liger", 50, dtype="float32", provenance=a),
               rec("triton", 66, dtype="float32", provenance=c, ts="2026-11-29T12:00:00"),
               rec("liger", 60, dtype="float32", provenance=c, ts="2026-11-29T12:00:00"),   # later on c
               rec("triton", 50, dtype="float16", provenance=a), rec("liger", 40, dtype="float16", provenance=b)]
    out = summarize(tmp_path, records, "--matrix")
    assert "| rmsnorm | 16x4096 | **0.750**‡ | 1.250‡ | 1.100 |" in out
    out = summarize(tmp_path, records, "--matrix", "--same-gpu")
    assert "| op | shape | bfloat16 | float32 |" in out   # fp16 never compared on one GPU: no column
    assert "| rmsnorm | 16x4096 | 1.250 | 1.100 |" in out and "‡" not in out
    # records naming no GPU are on none: they neither displace GPU-a's comparison nor make one
    unplaced = [rec("triton", 10, provenance={}, ts="2026-11-29T13:00:00"),
                rec("liger", 90, provenance={}, ts="2026-11-29T13:00:00")]
    assert "| rmsnorm | 16x4096 | 1.250 | 1.100 |" in summarize(tmp_path, records + unplaced, "--matrix", "--same-gpu")


def test_ours_and_peers_are_the_roles_the_records_carry(tmp_path):
    """A record says its framework's role: a framework of ours the summary does not name (here
    'cupy' and a new 'hip') is compared against the peers like Triton. A record without one
    (written before the field) is named in a warning and is neither ours nor a peer: the
    published records carry it since their migration, and the summary imports no framework
    to guess it."""
    records = [rec("hip", 60, role="ours"), rec("cupy", 55), rec("eager", 30),
               rec("triton", 50, dtype="float32"), rec("eager", 25, dtype="float32")]
    del records[3]["role"]   # before the field: not ours
    proc = run(tmp_path, records)
    assert proc.returncode == 0, proc.stderr
    assert "| rmsnorm | bfloat16 | 16x4096 | hip 60 GB/s |" in proc.stdout and "eager 30 GB/s" in proc.stdout
    assert "| 2.000 |" in proc.stdout and "float32" not in proc.stdout
    assert "line 4: no role: read as neither ours nor peer" in proc.stderr


def test_shapes_are_ordered_by_size_not_as_text(tmp_path):
    shapes = [(16384, 8192), (16, 4096), (8192, 16384), (1823, 781)]
    records = [rec(impl, 50, shape=shape) for shape in shapes for impl in ("triton", "liger")]
    expected = ["16x4096", "1823x781", "8192x16384", "16384x8192"]
    for args in ((), ("--matrix",)):
        rows = [line.split(" | ")[2 - len(args)] for line in summarize(tmp_path, records, *args).splitlines()[2:]]
        assert rows == expected


def test_an_empty_table_says_why_and_exits_non_zero(tmp_path):
    """Nothing to compare is an answer to explain, not an empty table with exit 0."""
    on_cpu = [rec("eager", 3.0, device="cpu", timer="wall", role="peer"),
              rec("triton", None, device="cpu", timer="wall_interpreter", role="ours")]
    proc = run(tmp_path, on_cpu)
    assert proc.returncode == 1 and proc.stdout == ""
    assert "all 2 records were measured on a CPU" in proc.stderr and "no bandwidth to compare" in proc.stderr
    proc = run(tmp_path, [rec("triton", 50), rec("triton", 40, dtype="float32")], "--matrix")
    assert proc.returncode == 1 and "no peer measured beside ours: triton" in proc.stderr
    proc = run(tmp_path, [rec("triton", 50, provenance={"gpu_uuid": "GPU-a"}),
                          rec("liger", 40, provenance={"gpu_uuid": "GPU-b"})], "--same-gpu")
    assert proc.returncode == 1 and "no case has ours and a peer measured on one GPU" in proc.stderr
    proc = run(tmp_path, [rec("triton", 50), rec("liger", 40)], "--min-bytes", str(1 << 30))
    assert proc.returncode == 1 and "none of the 2 records can be compared: 2 outside --min-bytes" in proc.stderr


def test_the_framework_table_gives_each_framework_s_best_passing_variant_at_the_first_shape_found(tmp_path):
    big, other = (32768, 4096), (16, 4096)
    records = [rec("cuda", 430, variant="tuned", shape=big, role="ours"),
               rec("cuda", 172, variant="naive", shape=big, role="ours"),
               rec("cuda", 400, variant="tuned", shape=big, dtype="float32", role="ours"),
               rec("numba", 999, shape=big, status="fail", role="ours"),             # failed: not its best
               rec("numba", 100, shape=big, dtype="float32", role="ours"),
               rec("eager", 86, shape=big, role="peer"),
               rec("quack", 999, shape=other, role="peer"),                           # not at the shape asked
               rec("liger", None, shape=big, status="skipped", role="peer", reason="no liger"),   # did not run
               rec("cuda", 430, variant="unsafe", shape=big, role="ours", negative_control=True, status="fail")]
    out = summarize(tmp_path, records, "--frameworks", "268435456,32768x4096")
    assert "| op | shape | cuda | numba | eager | quack |" in out
    assert "| rmsnorm | 32768x4096 | 10.0 / 9.3 | - / 2.3 | 2.0 /  |  |" in out


def test_a_missing_or_corrupt_file_is_a_line_naming_it_not_a_traceback(tmp_path):
    """A path that is not there, a folder, and a file with a line that is not JSON: each one
    line saying which file and what is wrong, exit 2, also with --frameworks. A last line a
    crash cut (no newline after it) is left out with a warning, the records before it read."""
    cut = tmp_path / "cut.jsonl"
    cut.write_text(json.dumps(rec("triton", 50)) + "\n" + json.dumps(rec("eager", 40))[:30])
    garbled = tmp_path / "garbled.jsonl"
    garbled.write_text(json.dumps(rec("triton", 50)) + "\n" + json.dumps(rec("eager", 40))[:30] + "\n")
    for path, why in ((tmp_path / "nothing.jsonl", "no such file"), (tmp_path, "cannot be read (IsADirectoryError"),
                      (garbled, "line 2: not JSON")):
        for args in ((), ("--frameworks",)):
            proc = subprocess.run([*COMMAND, str(path), *args], capture_output=True, text=True, timeout=60)
            assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
            assert proc.stderr.startswith(f"harness-results summary: {path}{':' if why[0] != 'l' else ','} {why}"), proc.stderr
    proc = subprocess.run([*COMMAND, str(cut), "--frameworks"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and f"{cut}, line 2: cut short" in proc.stderr, proc.stderr
    assert "triton" in proc.stdout, proc.stdout


def test_a_reader_that_leaves_early_costs_no_traceback(tmp_path):
    """`harness-results summary docs/results/h200.jsonl | head`: exit 141, nothing on stderr."""
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for n in range(1, 1500)
                            for r in (rec("triton", 50, shape=(n, 4096), role="ours"),
                                      rec("eager", 25, shape=(n, 4096), role="peer"))))
    proc = subprocess.Popen([*COMMAND, str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("| op |")
    proc.stdout.close()
    assert proc.wait(timeout=60) == 141
    assert proc.stderr.read() == ""


def test_by_op_gives_each_op_its_ranges_and_the_frameworks_that_were_best(tmp_path):
    """A row per op: the cases compared, ours' % of roof and ours / best peer as ranges, and
    which framework of ours and which peer was best, the most often first; --ours narrows
    ours to the frameworks named, the peers staying."""
    records = [rec("triton", 43), rec("cuda", 40), rec("liger", 40),                        # triton 1.075
               rec("triton", 30, dtype="float32"), rec("cuda", 38.7, dtype="float32"),
               rec("torch_compile", 43, dtype="float32"),                                   # cuda 0.900
               rec("cuda", 41.28, dtype="float16"), rec("liger", 43, dtype="float16")]     # cuda 0.960
    out = summarize(tmp_path, records, "--by-op")
    assert out.splitlines()[0] == "| op | cases | ours % of roof | ours / best peer | best of ours | best peer |"
    assert "| rmsnorm | 3 | 0.9-1.0 | 0.900-1.075 | cuda 2, triton 1 | liger 2, torch_compile 1 |" in out
    out = summarize(tmp_path, records, "--by-op", "--ours", "triton")
    assert "| rmsnorm | 2 | 0.7-1.0 | 0.698-1.075 | triton | liger 1, torch_compile 1 |" in out
    proc = run(tmp_path, records + [rec("numba", 10, status="fail")], "--ours", "numba")
    assert proc.returncode != 0 and "no impl of ours passed" in proc.stderr
    proc = run(tmp_path, records, "--ours", "numab")   # a name no record of ours has: said, with those there
    assert proc.returncode != 0 and "--ours numab: no record of ours" in proc.stderr and "cuda, triton" in proc.stderr
