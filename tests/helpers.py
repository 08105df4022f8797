"""Running the CLI as a user does (a subprocess), and reading what it recorded."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_harness(tmp_path, *args, env=None, timeout=900):
    """`python -m harness ARGS` with its run folder under tmp_path/run (multirun: tmp_path/multi)."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "HARNESS_CACHE": str(tmp_path / "cache"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "harness", *args, f"hydra.run.dir={tmp_path}/run",
                           f"hydra.sweep.dir={tmp_path}/multi", "roof.bytes=4194304"],
                          cwd=tmp_path, env=full_env, capture_output=True, text=True, timeout=timeout)


def results(tmp_path, sub="run") -> list[dict]:
    path = Path(tmp_path) / sub / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# A server's start is mostly imports: 20 s to its job backends on this project's CI machine
# while other tests ran, over 60 s when several test sessions shared its two cores.
START_DEADLINE_S = 240


# The harness logs runs, metrics and artifacts only; MLflow's job runner (its GenAI jobs) checks
# its requirements before the server starts and then runs as a process of its own beside it:
# off, a start here took 10 s instead of 14 s.
WITHOUT_JOBS = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


class MlflowServer:
    """A real tracking server on loopback, stopped and started by its process id."""

    def __init__(self, folder: Path, workers: int = 2):
        self.folder, self.port, self.proc, self.workers = folder, free_port(), None, workers
        self.uri = f"http://127.0.0.1:{self.port}"

    def start(self):
        self.folder.mkdir(parents=True, exist_ok=True)
        log = open(self.folder / "server.log", "a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{self.folder}/mlflow.db",
             "--artifacts-destination", str(self.folder / "artifacts"), "--host", "127.0.0.1",
             "--port", str(self.port), "--workers", str(self.workers)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **WITHOUT_JOBS})
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(self.uri + "/health", timeout=2):
                    return self
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"mlflow server did not start: {(self.folder / 'server.log').read_text()[-2000:]}")

    def stop(self, grace_s: float = 30):
        """SIGTERM, then SIGKILL after ``grace_s``: on a loaded machine, after a browser had used
        the UI, the server's own exit outlasted 30 s (its uvicorn worker had finished in 1 s)."""
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
            self.proc = None
