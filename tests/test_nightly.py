"""The nightly job for real: a single-node Slurm cluster (scripts/slurm-local, started by
scripts/test), Hydra's submitit launcher, and a real `mlflow server` on loopback that these
tests start, stop and restart by process id. No mocks.

Without Slurm these tests skip, unless HARNESS_REQUIRE_CLUSTER=1 (set by scripts/test
once it has started Slurm), where a missing cluster is a failure."""
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.helpers import MlflowServer

ROOT = Path(__file__).resolve().parent.parent


def _cluster_up() -> bool:
    if not shutil.which("sinfo"):
        return False
    proc = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True)
    return proc.returncode == 0 and any(s in proc.stdout for s in ("idle", "mix", "alloc"))


if not _cluster_up():
    if os.environ.get("HARNESS_REQUIRE_CLUSTER") == "1":
        raise RuntimeError("HARNESS_REQUIRE_CLUSTER=1 but no Slurm node is up (scripts/slurm-local start)")
    pytest.skip("no Slurm cluster here (scripts/slurm-local start makes one)", allow_module_level=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = MlflowServer(tmp_path_factory.mktemp("mlflow")).start()
    yield srv
    srv.stop()


LAUNCHER = ["hydra.launcher.gpus_per_node=null", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=2",
            "hydra.launcher.timeout_min=20", "hydra.launcher.array_parallelism=4", "roof.bytes=16777216",
            "sweep=smoke", "dtype=fp32"]


def nightly(step, uri, experiment, *args, env=None, timeout=900):
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_CACHE": "/tmp/kernel-harness-test-cache",
                **(env or {})}
    full_env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([sys.executable, "-m", "harness.commands.nightly", step, "--tracking-uri", uri,
                           "--experiment", experiment, *args], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def client_for(uri, experiment):
    from mlflow.tracking import MlflowClient
    client = MlflowClient(uri)
    return client, client.get_experiment_by_name(experiment).experiment_id


def runs(uri, experiment, flt):
    client, exp = client_for(uri, experiment)
    return client.search_runs([exp], flt, max_results=5000)


def jsonl_records(folder: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(folder.rglob("results.jsonl")) for line in f.read_text().splitlines()]


def test_every_jobs_records_reach_the_server_under_the_night(server, tmp_path):
    exp = f"night-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "night"
    proc = nightly("run", server.uri, exp, "--out", str(out), "op=copy,scale,softmax", "impl=eager", *LAUNCHER,
                   "--tune")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # harness-tune ran as Slurm jobs too; on this GPU-less cluster each refuses, which the report
    # says without changing the night's exit status
    assert "harness.commands.tune -m hydra/launcher=slurm" in proc.stdout
    assert proc.stdout.count("kept no comparison: its log (in ") == 3
    assert "harness-tune's multirun exited with 1" in proc.stderr   # Slurm kept the jobs' statuses
    assert len(list((out / "tune").glob("*-op=*"))) == 3
    records = jsonl_records(out)
    # the smoke shapes: copy's and scale's 3 each, softmax's 2 (conf/op/*.yaml)
    assert len(records) == 8 and {r["op"] for r in records} == {"copy", "scale", "softmax"}
    night = runs(server.uri, exp, "tags.`harness.kind` = 'night'")
    assert len(night) == 1 and night[0].info.status == "FINISHED"
    night_id = night[0].info.run_id
    invocations = runs(server.uri, exp, f"tags.`mlflow.parentRunId` = '{night_id}'")
    assert len(invocations) == 3            # one Slurm job per op, all children of the night
    cases = runs(server.uri, exp, f"tags.`harness.kind` = 'case' and tags.`harness.parent` = '{night_id}'")
    assert sorted(c.data.tags["harness.record_id"] for c in cases) == sorted(r["record_id"] for r in records)
    assert "uploaded 0 records that had not reached the server; 8 were there already" in proc.stdout
    assert (out / "report.md").exists()
    client, _ = client_for(server.uri, exp)
    assert "report.md" in [a.path for a in client.list_artifacts(night_id)]


def test_planted_slowdown_and_failure_are_flagged_and_an_unchanged_rerun_is_not(server, tmp_path):
    exp = f"planted-{uuid.uuid4().hex[:8]}"
    common = ["op=copy", "impl=planted", *LAUNCHER, "--min-effect", "0.25"]
    env = {"HARNESS_PLUGINS": "tests.plugins.planted"}

    first = nightly("run", server.uri, exp, "--out", str(tmp_path / "n1"), *common, env=env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "3 new" in first.stdout

    same = nightly("run", server.uri, exp, "--out", str(tmp_path / "n2"), *common, env=env)
    assert same.returncode == 0, same.stdout[-3000:]
    assert "0 regressions" in same.stdout and "3 cases compared" in same.stdout

    slow = nightly("run", server.uri, exp, "--out", str(tmp_path / "n3"), *common,
                   env={**env, "HARNESS_PLANTED_EXTRA_MS": "4"})
    assert slow.returncode == 1, slow.stdout[-3000:]
    assert slow.stdout.count("| slowdown | copy | planted |") == 3

    wrong = nightly("run", server.uri, exp, "--out", str(tmp_path / "n4"), *common,
                    env={**env, "HARNESS_PLANTED_WRONG": "1"})
    assert wrong.returncode == 1, wrong.stdout[-3000:]
    assert wrong.stdout.count("| correctness | copy | planted |") == 3
    report = wrong.stdout[wrong.stdout.index("## Regressions"):]
    assert report.index("## Regressions") < report.index("## Improvements")

    first_night = runs(server.uri, exp, "tags.`harness.kind` = 'night'")[-1].info.run_id   # oldest last
    pinned = nightly("run", server.uri, exp, "--out", str(tmp_path / "n5"), *common, "--baseline", first_night,
                     env=env)
    assert pinned.returncode == 0 and f"pinned baseline night {first_night}" in pinned.stdout, pinned.stdout[-3000:]


def test_a_server_stopped_mid_night_loses_nothing_and_uploads_nothing_twice(tmp_path):
    srv = MlflowServer(tmp_path / "mlflow").start()
    exp = f"outage-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "night"
    try:
        started = nightly("start", srv.uri, exp)
        assert started.returncode == 0, started.stderr
        night = started.stdout.strip().splitlines()[-1]
        srv.stop()                                              # the server goes down mid-night
        jobs = nightly("jobs", srv.uri, exp, "--night", night, "--out", str(out), "op=copy,scale", "impl=eager",
                       *LAUNCHER)
        assert jobs.returncode == 0, jobs.stdout[-3000:] + jobs.stderr[-3000:]
        records = jsonl_records(out)
        assert len(records) == 6                               # all on shared storage
        down = nightly("finish", srv.uri, exp, "--night", night, "--out", str(out))
        assert down.returncode == 3 and "wait in" in down.stderr
        srv.start()                                             # back
        up = nightly("finish", srv.uri, exp, "--night", night, "--out", str(out))
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        assert "uploaded 6 records that had not reached the server; 0 were there already" in up.stdout
        again = nightly("finish", srv.uri, exp, "--night", night, "--out", str(out))
        assert "uploaded 0 records that had not reached the server; 6 were there already" in again.stdout
        cases = runs(srv.uri, exp, f"tags.`harness.kind` = 'case' and tags.`harness.parent` = '{night}'")
        assert sorted(c.data.tags["harness.record_id"] for c in cases) == sorted(r["record_id"] for r in records)
    finally:
        srv.stop()


def test_a_request_slurm_refuses_is_one_line_naming_what_to_change(tmp_path):
    """The default asks a GPU a job; this cluster has none, so sbatch refuses the array."""
    proc = nightly("jobs", "unused", "unused", "--out", str(tmp_path), "op=copy", "impl=eager", "sweep=smoke",
                   "dtype=fp32", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=2", timeout=120)
    assert proc.returncode == 4, proc.stderr
    assert "harness: Slurm refused the jobs: sbatch: error:" in proc.stderr
    assert "hydra.launcher.gpus_per_node=null" in proc.stderr
    assert "Traceback" not in proc.stderr
