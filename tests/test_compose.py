"""`docker compose run harness op=rmsnorm impl=all`, for real, on CI's CPU machine: the image
built from docker/Dockerfile on a base made locally (scripts/ci-image), the `mlflow` service
brought up and waited for until healthy, the harness run through compose, and what it left
checked from outside the containers (docker's own view of them, and the volumes read on the
host): the records in the MLflow server's store, the JSONL in the results volume, the
non-root user, the GPU reservation of compose.yaml, the internal network. Then the outage:
the server stopped, a run, the server back, the upload, and no record lost or doubled.

Root only (dockerd). scripts/test starts the image build in the background before the other
tests and sets HARNESS_REQUIRE_COMPOSE=1, under which this test runs rather than skips; it
waits here for that build. Its steps' seconds go to <state>/test.log, which scripts/test prints."""
import json
import os
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CI_IMAGE = ROOT / "scripts" / "ci-image"
STATE = Path(os.environ.get("HARNESS_CI_IMAGE_STATE", ROOT / "build" / "ci-image"))
PROJECT = "kernel-harness-ci"          # scripts/ci-image's -p
BUILD_WAIT_S = 1500                    # the cold build: debootstrap, wheelhouse, image
RUN_CONTAINER = f"{PROJECT}-run"


def _log(step, seconds):
    with open(STATE / "test.log", "a") as f:
        f.write(f"test_compose: {step} {seconds:.0f} s\n")


def compose(*args, step=None, timeout=600, check=True):
    t0 = time.monotonic()
    proc = subprocess.run([str(CI_IMAGE), "compose", *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert proc.returncode == 0, (f"docker-compose {' '.join(args)} exited {proc.returncode}:\n"
                                      f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    if step:
        _log(step, time.monotonic() - t0)
    return proc


def docker(*args):
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"docker {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def volume(name) -> Path:
    return Path(docker("volume", "inspect", "--format", "{{.Mountpoint}}", f"{PROJECT}_{name}").strip())


def wait_healthy(timeout=180):
    t0 = time.monotonic()
    cid = compose("ps", "-q", "mlflow").stdout.strip()
    assert cid, "the mlflow service has no container"
    while time.monotonic() - t0 < timeout:
        health = docker("inspect", "--format", "{{.State.Health.Status}}", cid).strip()
        if health == "healthy":
            _log("mlflow healthy after", time.monotonic() - t0)
            return
        time.sleep(2)
    logs = subprocess.run(["docker", "logs", "--tail", "40", cid], capture_output=True, text=True).stderr
    pytest.fail(f"mlflow not healthy after {timeout} s (last: {health}):\n{logs}")


def wait_for_the_build():
    status = STATE / "status"
    if not status.exists() and not (STATE / "build.pid").exists():
        if os.environ.get("HARNESS_REQUIRE_COMPOSE") == "1":
            pytest.fail("HARNESS_REQUIRE_COMPOSE=1 but no image build was started (scripts/ci-image start)")
        pytest.skip("needs CI's image: as root, scripts/ci-image install && scripts/ci-image start "
                    "(scripts/test does it)")
    t0 = time.monotonic()
    while not status.exists():
        if time.monotonic() - t0 > BUILD_WAIT_S:
            pytest.fail(f"the image build did not finish in {BUILD_WAIT_S} s; its log: {STATE / 'build.log'}")
        time.sleep(2)
    _log("waited for the image build", time.monotonic() - t0)
    log = (STATE / "build.log").read_text()
    assert status.read_text().strip() == "0", f"the image build failed:\n{log[-6000:]}"


def results_files():
    return sorted((volume("results") / "outputs").rglob("results.jsonl"))


def read_records(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def uploaded_record_ids():
    """harness.record_id of every active case run in the server's store, read from the host."""
    db = sqlite3.connect(f"file:{volume('mlflow') / 'mlflow.db'}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT t.value FROM tags t JOIN runs r ON r.run_uuid = t.run_uuid "
            "WHERE t.key = 'harness.record_id' AND r.lifecycle_stage = 'active'").fetchall()
    finally:
        db.close()
    return [v for (v,) in rows]


def test_docker_compose_run_harness_reaches_mlflow_and_survives_its_outage():
    wait_for_the_build()
    compose("down", "-v", "--remove-orphans", step="down (before)")   # no volume of an earlier run may count
    if RUN_CONTAINER in docker("ps", "-a", "--format", "{{.Names}}").split():
        docker("rm", "-f", RUN_CONTAINER)
    try:
        compose("up", "-d", "--no-build", "mlflow", step="up mlflow")
        wait_healthy()
        net = json.loads(docker("network", "inspect", f"{PROJECT}_default"))[0]
        assert net["Internal"] is True, "CI's compose network must be internal: nothing may leave the machine"

        # The command as written: compose run, the arguments unchanged.
        run = compose("run", "-T", "--name", RUN_CONTAINER, "harness", "op=rmsnorm", "impl=all",
                      step="run op=rmsnorm impl=all")
        out = run.stdout + run.stderr
        info = json.loads(docker("inspect", RUN_CONTAINER))[0]
        docker("rm", RUN_CONTAINER)
        assert info["Config"]["User"] == "1000:1000", info["Config"]["User"]
        assert info["State"]["ExitCode"] == 0
        requests = info["HostConfig"]["DeviceRequests"] or []
        assert [(r["Driver"], r["Count"]) for r in requests] == [("nvidia", 1)], requests
        assert "MLflow: http://mlflow:5000" in out, out[-3000:]

        [first] = results_files()
        assert first.stat().st_uid == 1000, "the results were not written by the image's user (uid 1000)"
        records = read_records(first)
        # rmsnorm's smoke sweep: 2 shapes x 3 dtypes, a record for every framework with an rmsnorm
        # module in impls/rmsnorm/ in each (a skipped one included), and the same records in every
        # case (read from the folder: other tests in this process register frameworks of their own)
        modules = {p.stem for p in (ROOT / "impls" / "rmsnorm").glob("*.py") if p.stem != "__init__"}
        assert {r["impl"] for r in records} == modules
        per_case = Counter((tuple(r["shape"]), r["dtype"]) for r in records)
        assert len(per_case) == 6 and len(set(per_case.values())) == 1, per_case
        assert all(r["device"] == "cpu" for r in records)
        assert {r["status"] for r in records} <= {"ok", "skipped"}, \
            [(r["impl"], r["status"], r["reason"]) for r in records if r["status"] not in ("ok", "skipped")]
        ran = {r["impl"] for r in records if r["status"] == "ok"}
        assert ran == {"eager", "torch_compile", "triton"}, ran   # the GPU frameworks: no GPU here
        ids = {r["record_id"] for r in records}
        assert sorted(uploaded_record_ids()) == sorted(ids), "the MLflow store does not hold exactly the run's records"

        # The outage: the server down, a run; it keeps its records and says how to upload them.
        compose("stop", "mlflow", step="stop mlflow")
        run = compose("run", "-T", "--rm", "--no-deps", "harness", "op=rmsnorm", "impl=eager",
                      step="run op=rmsnorm impl=eager, server down")
        assert "MLflow: not uploaded" in run.stdout and "harness-upload" in run.stdout, run.stdout[-3000:]
        second = [f for f in results_files() if f != first]
        assert len(second) == 1, results_files()
        waiting = {r["record_id"] for r in read_records(second[0])}
        assert len(waiting) == 6 and not waiting & set(uploaded_record_ids())

        compose("start", "mlflow", step="start mlflow")
        wait_healthy()
        up = compose("run", "-T", "--rm", "--no-deps", "harness", "harness-upload", "/results/outputs",
                     step="harness-upload")
        stored = uploaded_record_ids()
        assert sorted(stored) == sorted(ids | waiting), (up.stdout + up.stderr)[-3000:]   # none lost, none twice
    finally:
        compose("down", "-v", "--remove-orphans", step="down", check=False)
