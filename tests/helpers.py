"""Running the CLI as a user does (a subprocess), and reading what it recorded."""
import json
import os
import subprocess
import sys
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
