"""One failing implementation never stops the others, even when it kills its process or hangs."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def harness(tmp_path, *args, timeout=600):
    env = {**os.environ, "HARNESS_PLUGINS": "tests.plugins.broken", "PYTHONPATH": str(ROOT),
           "HARNESS_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "harness", *args, f"hydra.run.dir={tmp_path}/run",
                           "tracking=none", "sweep=smoke", "dtype=fp32", "roof.bytes=4194304"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)
    records = []
    path = tmp_path / "run" / "results.jsonl"
    if path.exists():
        records = [json.loads(line) for line in path.read_text().splitlines()]
    return proc, records


@pytest.mark.slow
def test_crash_hang_and_raise_each_cost_only_their_own_case(tmp_path):
    proc, records = harness(tmp_path, "op=rmsnorm", "impl=[broken,eager]",
                            "variant=[crashes,hangs,raises,-]", "shapes=[[4,64]]", "case_timeout_s=20")
    assert proc.returncode == 0, proc.stderr
    status = {(r["impl"], r["variant"]): r["status"] for r in records}
    assert status == {("broken", "crashes"): "crash", ("broken", "hangs"): "timeout",
                      ("broken", "raises"): "error", ("eager", "-"): "ok"}, status
    by = {(r["impl"], r["variant"]): r for r in records}
    assert "exit code 139" in by[("broken", "crashes")]["reason"]
    assert "case_timeout_s=20" in by[("broken", "hangs")]["reason"]
    assert "CRASH" in proc.stdout and "TIMEOUT" in proc.stdout


def test_strict_mode_exits_nonzero_on_a_failure(tmp_path):
    proc, records = harness(tmp_path, "op=rmsnorm", "impl=broken", "variant=wrong",
                            "shapes=[[4,64]]", "strict=true", "isolate=false")
    assert proc.returncode == 1 and records[0]["status"] == "fail"
