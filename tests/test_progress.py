"""harness.run.progress: the bar with its ETA on a terminal, plain lines elsewhere, and what a
case is doing (compiling, building) on its way from a worker process to the run's output."""
import os
import pty
import select
import subprocess
import sys
import time

import torch

from harness.run import progress
from harness.run.runner import CaseSpec
from tests.conftest import _cpu_runner
from tests.helpers import ROOT, run_harness
from tests.plugins.phases import SAID

PLUGIN = {"HARNESS_PLUGINS": "tests.plugins.phases"}


def test_a_worker_sends_what_its_case_is_doing_to_the_parent(monkeypatch):
    from harness.run.worker import IsolatedRunner
    monkeypatch.setenv("HARNESS_PLUGINS", PLUGIN["HARNESS_PLUGINS"])
    settings = _cpu_runner(contract=False).settings
    runner = IsolatedRunner(torch.device("cpu"), settings, case_timeout_s=120)
    heard = []
    previous = progress.report_to(heard.append)
    try:
        rec = runner.run(CaseSpec("copy", "phases", "-", "float32", (1000,)))
    finally:
        progress.report_to(previous)
        runner.stop()
    assert rec.status == "ok", rec.reason
    assert SAID in heard


def test_a_log_gets_the_phase_as_a_line_of_its_own(tmp_path):
    proc = run_harness(tmp_path, "op=copy", "impl=phases", "dtype=fp32", "shapes=[[1000]]", "sweep=smoke",
                       "tracking=none", env=PLUGIN)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"  copy phases float32 1000: {SAID}\n" in proc.stdout
    assert "[1/1] copy phases float32 1000: ok" in proc.stdout
    assert "━" not in proc.stdout   # no bar drawn into a log


def test_a_terminal_gets_a_bar_with_an_eta_and_the_phase_in_it(tmp_path):
    """The harness in a pseudo-terminal: the bar (done / total, elapsed, eta) and the
    running case's phase are drawn, and the case lines and the table still come."""
    leader, follower = pty.openpty()
    env = {**os.environ, **PLUGIN, "PYTHONPATH": str(ROOT), "HARNESS_CACHE": str(tmp_path / "cache"),
           "COLUMNS": "160", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "harness", "op=copy", "impl=[phases,eager]", "dtype=fp32",
                             "shapes=[[1000],[3000]]", "sweep=smoke", "tracking=none", f"hydra.run.dir={tmp_path}/run",
                             "roof.bytes=4194304"], cwd=tmp_path, env=env, stdin=follower, stdout=follower,
                            stderr=follower)
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        try:
            chunk = os.read(leader, 65536)
        except OSError:   # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    if proc.poll() is None:
        proc.kill()
    assert proc.wait(timeout=30) == 0, seen.decode(errors="replace")[-3000:]
    text = seen.decode(errors="replace")
    assert "eta" in text and "━" in text and "/4" in text, text[-3000:]   # the bar: done of 4, and its ETA
    assert SAID in text
    assert "[4/4] copy eager float32 3000: ok" in text and "GB/s (% of roof)" in text


def test_a_log_says_a_phase_once_a_case(capsys):
    """torch.compile said "compiling" twice a case (again for the batch-invariance rows)."""
    from harness.run.progress import RunProgress, phase
    with RunProgress(2, live=False) as bar:
        bar.case("rmsnorm torch_compile float32 3x1000")
        phase("torch.compile: compiling")
        phase("torch.compile: compiling")
        bar.case("rmsnorm torch_compile float32 4x4096")
        phase("torch.compile: compiling")
    assert capsys.readouterr().out.count(": torch.compile: compiling\n") == 2
