"""JSONL, the console table, and MLflow against a real sqlite store; upload after an outage."""
import json
import re
import socket

import pytest

from harness.records.record import INTERRUPTED, Record
from harness.records.sinks import console, jsonl
from harness.records.sinks.mlflow import MlflowLogger, TrackingUnavailable, upload
from harness.records.upload import main as upload_main


def records(invocation="inv1", n=3):
    out = []
    for i, shape in enumerate([[1, 4096], [16, 4096], [32768, 4096]][:n]):
        out.append(Record(op="rmsnorm", impl="triton", variant="-", dtype="bfloat16", shape=shape,
                          status="ok", bytes=2 ** (12 + 4 * i), bytes_read=2 ** (11 + 4 * i),
                          bytes_written=2 ** (11 + 4 * i), median_us=10.0 + i, gbps=100.0 * (i + 1),
                          pct_roof=10.0 * (i + 1), roof_gbps=4000, passed=True, deterministic=True,
                          n_distinct=1, invocation_id=invocation, provenance={"gpu_name": "NVIDIA H200"},
                          impl_config={"rows": 2, "num_warps": 8, "source": "table conf/launch/h200.yaml@0123"}))
    out.append(Record(op="rmsnorm", impl="cupy", variant="-", dtype="bfloat16", shape=[16, 4096],
                      status="skipped", reason="cupy is not installed", invocation_id=invocation))
    return out


def test_jsonl_round_trip(tmp_path):
    written = records()
    sink = jsonl.JsonlSink(tmp_path / "s" / "results.jsonl")
    for r in written:
        sink.write(r)
    back = jsonl.read(tmp_path / "s" / "results.jsonl")
    assert [r.as_dict() for r in back] == [r.as_dict() for r in written]
    assert back[0].shape == [1, 4096] and back[-1].status == "skipped"


def test_jsonl_rejects_garbage_with_the_line_number(tmp_path):
    p = tmp_path / "results.jsonl"
    p.write_text('{"op": "copy", "impl": "eager", "variant": "-", "dtype": "float32", "shape": [1]}\nnot json\n')
    with pytest.raises(jsonl.BadResults, match="line 2: not JSON"):
        jsonl.read(p)


def test_jsonl_keeps_the_records_before_a_last_line_a_crash_cut(tmp_path, capsys):
    """A crash mid-write leaves a last line without its newline: the records before it are
    read (a warning names the cut line); the same text followed by a newline is garbage
    inside the file, and an error."""
    sink, written = jsonl.JsonlSink(tmp_path / "results.jsonl"), records()
    for r in written:
        sink.write(r)
    whole = sink.path.read_text()
    sink.path.write_text(whole + whole.splitlines()[0][:40])
    back = jsonl.read(sink.path)
    assert [r.as_dict() for r in back] == [r.as_dict() for r in written]
    assert f"line {len(back) + 1}: cut short" in capsys.readouterr().err
    sink.path.write_text(whole + whole.splitlines()[0][:40] + "\n")
    with pytest.raises(jsonl.BadResults, match=f"line {len(back) + 1}: not JSON"):
        jsonl.read(sink.path)


def test_a_run_that_appends_to_a_cut_file_ends_the_cut_line_first(tmp_path, capsys):
    """Records appended to a file a killed run left without its last newline: a cut record is
    dropped (warned), a whole one gets its newline; every record after it reads back."""
    written = records()
    whole = "".join(json.dumps(r.as_dict(), default=str) + "\n" for r in written[:2])
    for tail, kept in ((whole.splitlines()[0][:40], 2), (whole.splitlines()[0], 3)):
        path = tmp_path / f"kept{kept}.jsonl"
        path.write_text(whole + tail)
        jsonl.JsonlSink(path).write(written[2])
        assert len(jsonl.read(path)) == kept + 1
    assert "bytes dropped" in capsys.readouterr().err


def test_console_table_reads_at_a_glance():
    text = console.render(records())
    assert "rmsnorm · bfloat16" in text and "GB/s (% of roof)" in text
    assert "32768x4096" in text and "300 (30%)" in text
    assert "skipped cupy: cupy is not installed" in text


def test_console_says_when_cases_run_above_their_roof():
    recs = records()
    assert "roof check" not in console.render(recs)
    recs[2].pct_roof, recs[2].gbps, recs[2].roof_source = 103.9, 4156.0, "measured cuda_events, read by torch.sum"
    recs[1].pct_roof = 101.5   # within the ~1% a roof and a case timed apart agree to, and a margin
    text = console.render(recs)
    assert "roof check: 1 case(s) more than 2% above their roof, up to 103.9%" in text
    assert "rmsnorm triton bfloat16 32768x4096" in text and "read by torch.sum" in text


def mlflow_runs(uri, kind=None):
    from mlflow.tracking import MlflowClient
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("kernel-harness")
    flt = f"tags.`harness.kind` = '{kind}'" if kind else ""
    return client, client.search_runs([exp.experiment_id], flt, max_results=1000)


def test_mlflow_layout_in_a_real_sqlite_store(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    recs = records()
    logger = MlflowLogger(uri, "kernel-harness")
    for r in recs:
        assert logger.log(r)
    logger.finish("inv1", recs)
    client, cases = mlflow_runs(uri, "case")
    assert len(cases) == 4
    big = next(c for c in cases if c.data.params["shape"] == "32768x4096")
    assert big.data.params["impl"] == big.data.params["series"] == "triton" and big.data.params["rows"] == "32768"
    # what ran, and where its config came from, next to the numbers in the UI
    assert big.data.params["config.rows"] == "2" and big.data.params["config.num_warps"] == "8"
    assert big.data.params["config.source"] == "table conf/launch/h200.yaml@0123"
    assert big.data.metrics["gbps"] == 300.0 and big.data.metrics["pct_roof"] == 30.0
    assert big.data.tags["gpu"] == "NVIDIA H200" and big.data.tags["status"] == "ok"
    _, series = mlflow_runs(uri, "series")
    triton = next(s for s in series if s.data.tags["impl"] == "triton")
    history = client.get_metric_history(triton.info.run_id, "gbps_C4096")
    assert sorted((m.step, m.value) for m in history) == [(4096, 100.0), (65536, 200.0), (1048576, 300.0)]
    _, inv = mlflow_runs(uri, "invocation")
    assert len(inv) == 1 and inv[0].info.status == "FINISHED"
    assert {s.info.status for s in series} == {"FINISHED"}   # none left RUNNING
    exp = client.get_experiment_by_name("kernel-harness")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"   # the UI opens on runs
    assert logger.ui_path("inv1", "report.html") == (f"/#/experiments/{exp.experiment_id}/runs/{inv[0].info.run_id}"
                                                     "/artifacts/report.html?workflowType=machine_learning")
    assert logger.ui_path("no-such-invocation") == f"/#/experiments/{exp.experiment_id}?workflowType=machine_learning"
    assert big.data.tags["mlflow.parentRunId"] == triton.info.run_id
    assert triton.data.tags["mlflow.parentRunId"] == inv[0].info.run_id


@pytest.mark.parametrize("filesystem, journal", [("ext4", "wal"), ("nfs4", "delete")])
def test_a_local_sqlite_store_writes_ahead_and_a_network_one_keeps_sqlite_s_defaults(tmp_path, monkeypatch,
                                                                                      filesystem, journal):
    """A store on a local disk commits without a sync per commit (WAL; up to 122 -> ~20 ms a case
    on CI's disk); one on a network filesystem, where hosts cannot share WAL's index, is left as
    sqlite makes it. Both hold every record."""
    import sqlite3

    import harness.records.sinks.mlflow as sink
    mounts = tmp_path / "mounts"
    mounts.write_text(f"rootfs / ext4 rw 0 0\nserver:/export {tmp_path} {filesystem} rw 0 0\n")
    monkeypatch.setattr(sink, "MOUNTS", mounts)
    db = tmp_path / "store" / "mlflow.db"
    db.parent.mkdir()
    logger = MlflowLogger(f"sqlite:///{db}", "kernel-harness")
    for r in records("inv-wal"):
        assert logger.log(r)
    logger.finish("inv-wal", records("inv-wal"))
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == journal
    _, cases = mlflow_runs(f"sqlite:///{db}", "case")
    assert len(cases) == 4


def test_upload_is_idempotent(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    recs = records("inv2")
    assert upload(recs[:2], uri, "kernel-harness") == (2, 0)
    assert upload(recs, uri, "kernel-harness") == (2, 2)     # a fresh client finds the first two
    client, cases = mlflow_runs(uri, "case")
    assert len(cases) == 4
    _, series = mlflow_runs(uri, "series")
    assert {s.info.status for s in series} == {"FINISHED"}
    triton = next(s for s in series if s.data.tags["impl"] == "triton")
    assert len(client.get_metric_history(triton.info.run_id, "gbps_C4096")) == 3


@pytest.mark.parametrize("status,control,colour,reason", [
    ("ok", False, "FINISHED", ""), ("skipped", False, "FINISHED", ""), ("fail", True, "FINISHED", ""),   # xfail
    ("ok", True, "FAILED", ""),   # XPASS: the negative control's inputs are too weak
    ("fail", False, "FAILED", ""), ("invalid", False, "FAILED", ""), ("crash", False, "FAILED", ""),
    ("error", False, "KILLED", INTERRUPTED)])   # cut by a Ctrl-C: not a failure of the impl
def test_a_case_runs_mlflow_status_reads_as_the_ui_colours_it(status, control, colour, reason):
    from harness.records.sinks.mlflow import run_status
    r = Record("layernorm", "triton", "unsafe", "float32", [4, 8], status=status, negative_control=control,
               reason=reason)
    assert run_status(r) == colour


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_an_unreachable_server_is_reported_at_once(tmp_path):
    import time
    t = time.monotonic()
    with pytest.raises(TrackingUnavailable, match="unreachable"):
        MlflowLogger(f"http://127.0.0.1:{closed_port()}", "kernel-harness")
    assert time.monotonic() - t < 10


def test_upload_command_after_an_outage(tmp_path, capsys):
    path = tmp_path / "results.jsonl"
    sink = jsonl.JsonlSink(path)
    for r in records("inv3"):
        sink.write(r)
    down = f"http://127.0.0.1:{closed_port()}"
    assert upload_main([str(path), "--tracking-uri", down]) == 1
    assert "unreachable" in capsys.readouterr().err
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert upload_main([str(tmp_path), "--tracking-uri", uri]) == 0
    assert "4 uploaded, 0 already there" in capsys.readouterr().out
    assert upload_main([str(path), "--tracking-uri", uri]) == 0
    assert "0 uploaded, 4 already there" in capsys.readouterr().out
    assert upload_main([str(tmp_path / "nope"), "--tracking-uri", uri]) == 2
    # a published results file's devtools/first-run rows are no records: its cases are uploaded
    published = tmp_path / "pub" / "h200.jsonl"
    published.parent.mkdir()
    published.write_text(path.read_text() + json.dumps({"kind": "first_run", "op": "copy", "phase": "cold",
                                                        "seconds": 9.0, "gpu": "NVIDIA H200"}) + "\n")
    assert upload_main([str(published), "--tracking-uri", uri]) == 0
    assert "0 uploaded, 4 already there" in capsys.readouterr().out


@pytest.mark.parametrize("uri,ok", [("sqlite:///mlflow.db", True), ("http://mlflow:5000", True),
                                    ("postgresql+psycopg2://u@h/db", True), ("garbage", False),
                                    ("://", False), ("localhost:5000", False), ("./mlruns", False)])
def test_a_tracking_uri_mlflow_has_no_store_for_is_named(tmp_path, capsys, monkeypatch, uri, ok):
    """MLflow 3 refuses a path (its file store) and knows no 'localhost:' scheme: upload gave
    a traceback for them; now exit 2 with the URI and what to give."""
    from harness.records.sinks.mlflow import uri_problem
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    assert (uri_problem(uri) is None) == ok, uri_problem(uri)
    if not ok:
        assert upload_main([str(tmp_path), "--tracking-uri", uri]) == 2
        assert f"--tracking-uri: {uri!r} is not an MLflow tracking URI" in capsys.readouterr().err


def test_upload_names_an_unreadable_file_and_uploads_the_others(tmp_path, capsys):
    """A results file that cannot be read stopped the upload there, the files after it not
    sent; now it is named, every other file is uploaded, and the exit status is 2."""
    bad, good = tmp_path / "a" / "results.jsonl", tmp_path / "b" / "results.jsonl"
    bad.parent.mkdir()
    bad.write_text("{not json\n{}\n")
    sink = jsonl.JsonlSink(good)
    for r in records("inv-after-bad"):
        sink.write(r)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert upload_main([str(tmp_path), "--tracking-uri", uri]) == 2
    captured = capsys.readouterr()
    assert f"harness-upload: error: {bad}, line 1: not JSON" in captured.err
    assert f"1 of 2 files could not be read (above): {bad}" in captured.err
    assert f"{good}: 4 uploaded, 0 already there" in captured.out
    assert len(mlflow_runs(uri, "case")[1]) == 4


def test_cpu_tables_show_significant_digits_and_mark_cached_and_noisy_cases():
    prov = {"cpu_cache_bytes": 32 << 20}
    small = Record("copy", "torch_compile", "-", "float32", [1000], status="ok", timer="wall", bytes=8000,
                   median_us=250.0, spread=0.9, gbps=0.032, roof_gbps=17.0, pct_roof=130.0, provenance=prov)
    big = Record("copy", "eager", "-", "float32", [1 << 26], status="ok", timer="wall", bytes=1 << 29,
                 median_us=30000.0, spread=0.02, gbps=17.9, roof_gbps=17.0, pct_roof=105.0, provenance=prov)
    text = console.render([small, big])
    assert "250.0~c" in text and "0.032" in text and "17.9" in text
    assert "c: the case fits in the CPU's cache" in text and "~: noisy" in text
    roof = [line for line in text.splitlines() if line.startswith("roof check")]
    assert roof and "copy eager float32 67108864" in roof[0]    # the cached case says nothing of the roof


def test_a_case_run_an_outage_left_running_is_replaced_on_upload(tmp_path):
    """The record in flight when the server went: its run was created, never ended. Upload
    replaces it with the whole record instead of counting it as already there."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    recs = [r for r in records("inv-cut") if r.status == "ok"]
    logger = MlflowLogger(uri, "kernel-harness")
    logger.log(recs[0])
    series = logger._series_run(recs[1])
    cut = logger.client.create_run(logger.experiment_id, tags={"harness.kind": "case", "mlflow.parentRunId": series,
                                                               "harness.invocation_id": "inv-cut",
                                                               "harness.record_id": recs[1].record_id})
    assert upload(recs, uri, "kernel-harness") == (len(recs) - 1, 1)
    client, cases = mlflow_runs(uri, "case")
    assert sorted(c.data.tags["harness.record_id"] for c in cases) == sorted(r.record_id for r in recs)
    assert {c.info.status for c in cases} == {"FINISHED"} and cut.info.run_id not in {c.info.run_id for c in cases}


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_server_stopped_at_a_random_point_loses_nothing_and_keeps_nothing_twice(tmp_path, seed, capfd):
    """A real `mlflow server` killed at a random moment while records are logged, then
    started again and the records uploaded: each record is on the server exactly once, as a
    finished run with its metrics, including the one in flight when the server went. And
    MLflow's own "View run" line per run it ends is not printed."""
    import random
    import threading

    from tests.helpers import MlflowServer
    srv = MlflowServer(tmp_path / "mlflow", workers=1).start()
    recs = []
    for i in range(12):
        recs += [r for r in records(f"inv-{seed}") if r.status == "ok"]
    for r in recs:
        r.record_id = f"{seed}-{len(r.record_id)}-{id(r)}"
    try:
        killer = threading.Timer(random.Random(seed).uniform(0.2, 1.5), srv.stop)
        killer.start()
        try:
            logger = MlflowLogger(srv.uri, "kernel-harness")
            for r in recs:
                logger.log(r)
        except Exception:  # noqa: BLE001 - the outage, wherever it landed
            pass
        killer.join()
        srv.start()
        new, old = upload(recs, srv.uri, "kernel-harness")
        assert new + old == len(recs) and new > 0, (new, old)
        _, cases = mlflow_runs(srv.uri, "case")
        assert sorted(c.data.tags["harness.record_id"] for c in cases) == sorted(r.record_id for r in recs)
        assert {c.info.status for c in cases} == {"FINISHED"}
        assert all("median_us" in c.data.metrics for c in cases)
        _, series = mlflow_runs(srv.uri, "series")
        assert {s.info.status for s in series} == {"FINISHED"}
        assert "View run" not in capfd.readouterr().out
    finally:
        srv.stop()


def test_a_tracking_failure_reads_as_one_whole_sentence():
    """MLflow's message for a server that went away nests urllib3's: 400+ characters, which
    the run cut mid-word. Said whole: which address, and what the socket said."""
    from harness.records.sinks.mlflow import explain
    e = Exception(
        "API request to http://127.0.0.1:5999/api/2.0/mlflow/runs/create failed with exception "
        "HTTPConnectionPool(host='127.0.0.1', port=5999): Max retries exceeded with url: "
        "/api/2.0/mlflow/runs/create (Caused by NewConnectionError(\"HTTPConnection(host='127.0.0.1', "
        "port=5999): Failed to establish a new connection: [Errno 111] Connection refused\"))")
    assert explain(e) == ("http://127.0.0.1:5999/api/2.0/mlflow/runs/create did not answer "
                          "(Connection refused, errno 111)")
    long = ValueError("The first sentence says what happened. " + "Then detail " * 40)
    said = explain(long)
    assert said == "ValueError: The first sentence says what happened. [...]"
    assert explain(RuntimeError("short")) == "RuntimeError: short"


def test_the_console_puts_our_best_against_the_best_peer_per_shape():
    recs = records()
    for r in recs:
        r.role = "ours"
    peer = Record(op="rmsnorm", impl="liger", variant="-", dtype="bfloat16", shape=[32768, 4096], status="ok",
                  bytes=2 ** 20, median_us=1.0, gbps=250.0, pct_roof=25.0, roof_gbps=4000, role="peer")
    text = console.render(recs + [peer])
    assert "ours / best peer" in text
    assert "32768x4096      1.200  triton 300 against liger 250 GB/s" in text
    assert "16x4096  " not in text.split("ours / best peer")[1]   # no peer there: no line


def test_a_framework_declares_its_role():
    from harness.registry import Framework, frameworks, role_of
    assert role_of("triton") == "ours" and role_of("eager") == "peer" and role_of("liger") == "peer"
    assert role_of("no-such-framework") == "peer"
    assert {f.role for f in frameworks().values()} <= {"ours", "peer"}
    with pytest.raises(ValueError, match="role 'mine'"):
        type("Mine", (Framework,), {"name": "mine-test", "role": "mine"})


def test_a_name_that_does_not_resolve_is_said_whole_too():
    from harness.records.sinks.mlflow import explain
    e = Exception("API request to http://mlflow:5000/api/2.0/mlflow/runs/create failed with exception "
                  "HTTPConnectionPool(host='mlflow', port=5000): Max retries exceeded (Caused by NameResolutionError("
                  "\"<urllib3.connection.HTTPConnection object at 0x7f>: Failed to resolve 'mlflow' ([Errno -2] Name "
                  "or service not known)\"))")
    assert explain(e) == ("http://mlflow:5000/api/2.0/mlflow/runs/create did not answer "
                          "(Name or service not known, errno -2)")


def test_a_record_the_disk_cannot_take_leaves_the_file_as_it_was_and_names_the_disk(tmp_path, monkeypatch):
    """The disk fills mid-line (a write that takes part of the line, then ENOSPC): the part is
    taken back, so the file holds whole records only and the next one that fits reads back."""
    import errno
    import os
    sink = jsonl.JsonlSink(tmp_path / "results.jsonl")
    first, second, third = records()[:3]
    sink.write(first)
    before = sink.path.read_bytes()
    real_write, calls = os.write, []

    def fills_up(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[:len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "write", fills_up)
    with pytest.raises(jsonl.NotWritten, match=r"results.jsonl cannot be written: No space left on device on the "
                                               r"disk mounted at /"):
        sink.write(second)
    monkeypatch.setattr(os, "write", real_write)
    assert sink.path.read_bytes() == before and sink.written == 1 and "No space left" in sink.error
    sink.write(third)
    assert [r.record_id for r in jsonl.read(sink.path)] == [first.record_id, third.record_id]


def test_the_invocation_run_is_named_by_what_ran_where_though_its_first_case_was_skipped(tmp_path):
    """A run's first case skipped (its record holds no provenance: every impl=all run on a CPU
    begins with cuda): the invocation run took its GPU and commit from that record (gpu cpu,
    git_sha None on an H200). Now from the records that have them; the run is named by its op,
    impls and GPU, and tagged with them."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    skipped = Record("rmsnorm", "cuda", "-", "bfloat16", [16, 4096], device="cuda", status="skipped",
                     reason="not built", invocation_id="inv-named")
    recs = [skipped] + [r for r in records("inv-named") if r.status == "ok"]
    for r in recs[1:]:
        r.provenance = {"gpu_name": "NVIDIA H200", "git_sha": "0123abc"}
    logger = MlflowLogger(uri, "kernel-harness")
    for r in recs:
        logger.log(r)
    logger.finish("inv-named", recs)
    _, (inv,) = mlflow_runs(uri, "invocation")
    assert inv.data.tags["gpu"] == "NVIDIA H200" and inv.data.tags["git_sha"] == "0123abc"
    assert inv.info.run_name == "rmsnorm · cuda, triton · NVIDIA H200"
    assert inv.data.tags["op"] == "rmsnorm" and inv.data.tags["impl"] == "cuda,triton"


@pytest.mark.slow
def test_the_invocation_run_counts_its_cases_as_the_console_does(tmp_path):
    """A negative control failing as it must is xfail on the console; MLflow counted it in
    n_fail. The invocation's counts are now the console's line, word for word."""
    from tests.helpers import run_harness
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    proc = run_harness(tmp_path, "op=layernorm", "impl=eager", "dtype=fp32", "shapes=[[4,64]]",
                       f"tracking.uri={uri}", "isolate=false", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = re.search(r"^cases: (.*)$", proc.stdout, re.M).group(1)
    assert said == "1 ok, 1 xfail"
    _, (inv,) = mlflow_runs(uri, "invocation")
    counted = {k: v for k, v in inv.data.metrics.items() if k.startswith("n_") and k != "n_not_run"}
    assert counted == {"n_ok": 1.0, "n_xfail": 1.0} and inv.data.metrics["n_not_run"] == 0


def _first_run_on_a_new_store(uri: str, invocation: str, start, failures) -> None:
    """One of several processes that open a store no one has created, at once."""
    try:
        start.wait()
        logger = MlflowLogger(uri, "kernel-harness")
        for r in records(invocation):
            logger.log(r)
        logger.finish(invocation, records(invocation))
    except Exception as e:  # noqa: BLE001 - the parent asserts there were none
        failures.put(f"{invocation}: {type(e).__name__}: {str(e)[:300]}")


@pytest.mark.slow
def test_first_runs_at_once_on_a_new_sqlite_store_are_all_logged_and_leave_it_usable(tmp_path):
    """Three runs opening one new sqlite store at the same moment: each created and migrated its
    tables ("duplicate column name: step"), so one logged nothing (and exited 0), and a store can
    be left half migrated for good. The store's creation is serialised: every run's records are
    there, and the store opens again."""
    import multiprocessing
    uri = f"sqlite:///{tmp_path}/store/mlflow.db"
    (tmp_path / "store").mkdir()
    ctx = multiprocessing.get_context("spawn")
    start, failures = ctx.Barrier(3), ctx.Queue()
    procs = [ctx.Process(target=_first_run_on_a_new_store, args=(uri, f"inv-at-once-{i}", start, failures))
             for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    said = [failures.get() for _ in range(failures.qsize())]
    assert said == [] and [p.exitcode for p in procs] == [0, 0, 0]
    _, cases = mlflow_runs(uri, "case")
    assert sorted(c.data.tags["harness.invocation_id"] for c in cases) == sorted(
        f"inv-at-once-{i}" for i in range(3) for _ in range(4))
    assert upload(records("inv-after"), uri, "kernel-harness") == (4, 0)   # the store is whole


def _case_runs(uri):
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("kernel-harness")
    return client.search_runs([exp.experiment_id], "tags.`harness.kind` = 'case'", run_view_type=ViewType.ACTIVE_ONLY,
                              max_results=1000)


def test_upload_removes_a_running_copy_of_a_record_that_is_logged_whole(tmp_path):
    """A Ctrl-C while a case run was created against a server: the request went on in a server
    worker after the retry had logged the record whole, leaving a second run of the record,
    RUNNING, with no metrics. Upload saw the record as there and never removed the copy."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    recs = [r for r in records("inv-copy") if r.status == "ok"]
    logger = MlflowLogger(uri, "kernel-harness")
    for r in recs:
        logger.log(r)
    logger.finish("inv-copy", recs)
    logger.client.create_run(logger.experiment_id, tags={"harness.kind": "case", "harness.invocation_id": "inv-copy",
                                                         "harness.record_id": recs[1].record_id})
    assert upload(recs, uri, "kernel-harness") == (0, len(recs))
    cases = _case_runs(uri)
    assert sorted(c.data.tags["harness.record_id"] for c in cases) == sorted(r.record_id for r in recs)
    assert {c.info.status for c in cases} == {"FINISHED"}


def test_a_run_whose_logging_a_sigint_cut_removes_the_copy_the_cut_request_made(tmp_path, monkeypatch):
    """The same, within the run: the SIGINT lands in a case run's creation, the record is
    logged again, then the cut request's run appears: the run's end removes it."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    recs = [r for r in records("inv-cut-copy") if r.status == "ok"]
    logger = MlflowLogger(uri, "kernel-harness")
    logger.log(recs[0])
    create, calls = logger.client.create_run, []

    def cut_once(*args, **kwargs):
        calls.append(kwargs.get("tags", {}).get("harness.record_id"))
        if calls.count(recs[1].record_id) == 1:
            raise KeyboardInterrupt
        return create(*args, **kwargs)
    monkeypatch.setattr(logger.client, "create_run", cut_once)
    with pytest.raises(KeyboardInterrupt):
        logger.log(recs[1])
    assert logger.log(recs[1])
    # the cut request, done by the server after the record was logged again
    create(logger.experiment_id, tags={"harness.kind": "case", "harness.invocation_id": "inv-cut-copy",
                                       "harness.record_id": recs[1].record_id})
    logger.finish("inv-cut-copy", recs[:2], interrupted=True)
    cases = _case_runs(uri)
    assert sorted(c.data.tags["harness.record_id"] for c in cases) == sorted(r.record_id for r in recs[:2])
    assert {c.info.status for c in cases} == {"FINISHED"}


@pytest.mark.slow
def test_a_server_that_dies_during_upload_is_one_line_and_the_command_to_rerun(tmp_path, capsys, monkeypatch):
    """The tracking server stopped after a few records of an upload: a 117-line traceback and
    exit 1. Now one line saying what failed and the command that uploads the rest; that
    command, once the server is back, puts every record there once."""
    from tests.helpers import MlflowServer
    srv = MlflowServer(tmp_path / "mlflow", workers=1).start()
    try:
        path = tmp_path / "run" / "results.jsonl"
        sink = jsonl.JsonlSink(path)
        recs = [r for _ in range(3) for r in records("inv-dies")]
        for r in recs:
            r.record_id = f"dies-{id(r)}"
            sink.write(r)
        original, logged = MlflowLogger.log, []

        def server_dies_at_the_fifth(self, r):
            logged.append(r)
            if len(logged) == 5:
                srv.stop()
            return original(self, r)
        monkeypatch.setattr(MlflowLogger, "log", server_dies_at_the_fifth)
        assert upload_main([str(path), "--tracking-uri", srv.uri]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 2, err
        assert err[0].startswith(f"harness-upload: error: {srv.uri}/api/") and "did not answer" in err[0], err
        assert f"{path} was not uploaded whole" in err[0]
        assert err[1].endswith(f"harness-upload {path} --tracking-uri {srv.uri}"), err
        monkeypatch.setattr(MlflowLogger, "log", original)
        srv.start()
        assert upload_main(err[1].split()[1:]) == 0
        cases = _case_runs(srv.uri)
        assert sorted(c.data.tags["harness.record_id"] for c in cases) == sorted(r.record_id for r in recs)
        assert {c.info.status for c in cases} == {"FINISHED"}
    finally:
        srv.stop()


def test_an_upload_of_a_killed_runs_file_says_how_many_cases_never_ran(tmp_path, capsys):
    """A run killed (kill -9) after 4 of its 9 cases: its file holds 4 records, each naming its
    plan's size. Uploaded, its MLflow run read FINISHED, nothing said of the 5 cases that never
    ran. Now KILLED, n_not_run 5, and the upload says so."""
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps({**r.as_dict(), "plan_cases": 9}) + "\n" for r in records("inv-killed")))
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert upload_main([str(path), "--tracking-uri", uri]) == 0
    assert f"{path}: 4 uploaded, 0 already there; 5 cases never ran (their run was cut before them)" in \
        capsys.readouterr().out
    _, (inv,) = mlflow_runs(uri, "invocation")
    assert inv.info.status == "KILLED"
    assert inv.data.metrics["n_not_run"] == 5 and inv.data.metrics["n_ok"] == 3 and inv.data.metrics["n_skipped"] == 1


@pytest.mark.slow
def test_a_run_killed_mid_way_and_uploaded_reads_killed_with_the_cases_it_never_reached(tmp_path, capsys):
    """The same with a real run, killed (SIGKILL, its worker too) after its second record."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.helpers import ROOT
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "harness", "op=all", "impl=eager", "sweep=smoke", "tracking=none",
                             f"hydra.run.dir={tmp_path}/run", "roof.bytes=4194304"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    path, deadline = tmp_path / "run" / "results.jsonl", time.monotonic() + 300
    while not (path.exists() and path.read_text().count("\n") >= 2) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    planned = int(re.search(r"^harness: (\d+) cases", proc.communicate()[0], re.M).group(1))
    written = len(jsonl.read(path))
    assert 2 <= written < planned
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert upload_main([str(path), "--tracking-uri", uri]) == 0
    assert f"{planned - written} cases never ran" in capsys.readouterr().out
    _, (inv,) = mlflow_runs(uri, "invocation")
    assert inv.info.status == "KILLED" and inv.data.metrics["n_not_run"] == planned - written


def test_a_series_of_its_own_gets_its_own_series_run_named_and_labelled_by_it(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    logger = MlflowLogger(uri, "kernel-harness")
    base = dict(op="rmsnorm", impl="torch_compile", variant="-", dtype="bfloat16", shape=[16, 4096], status="ok",
                median_us=5.0, gbps=10.0, invocation_id="inv1", provenance={"gpu_name": "NVIDIA H200"})
    for series in ("torch_compile", "torch_compile[static]"):
        assert logger.log(Record(**base, series=series))
    logger.finish("inv1", [])
    _, series_runs = mlflow_runs(uri, "series")
    assert sorted((s.info.run_name, s.data.params["series"], s.data.tags["series"]) for s in series_runs) == [
        ("rmsnorm · torch_compile · bfloat16", "torch_compile", "torch_compile"),
        ("rmsnorm · torch_compile[static] · bfloat16", "torch_compile[static]", "torch_compile[static]")]
