"""The MLflow UI as a user opens it, in a real browser: headless Chromium against a real
`mlflow server` on loopback, after a real harness run. Asserts what the pages show (the runs
table, not the GenAI pages; the invocation run's report and plots) and writes a screenshot
of each page under the test's output folder (printed with -rP).

Skipped where no Chromium is installed, unless HARNESS_REQUIRE_BROWSER=1 (scripts/test sets
it after installing Debian's chromium as root, as CI runs it)."""
import os
import re
import shutil
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.helpers import MlflowServer, run_harness

BROWSER = next((b for b in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if b), None)
if BROWSER is None and os.environ.get("HARNESS_REQUIRE_BROWSER") == "1":
    raise RuntimeError("HARNESS_REQUIRE_BROWSER=1 but no chromium is installed (apt-get install chromium)")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(BROWSER is None, reason="no chromium installed (apt-get install chromium)")]

# Virtual time lets the page's scripts fetch the runs before the DOM is read.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
         "--window-size=1600,1000", "--virtual-time-budget=15000"]
# A page is read until it shows what the test looks for, for up to this long: under CI's load
# (two cores, three browsers and the other tests' processes) a page's virtual-time budget ran
# out once before the plot's image was in it; alone the page shows it at the first read.
PAGE_DEADLINE_S = 120


def browse(url: str, screenshot, shows: str) -> str:
    """The page's DOM once it contains ``shows`` (or the last read at the deadline, for the
    test's assertion to print); a screenshot of the page taken after that read."""
    deadline = time.monotonic() + PAGE_DEADLINE_S
    while True:
        dom = subprocess.run([BROWSER, *FLAGS, "--dump-dom", url], capture_output=True, text=True, timeout=120)
        assert dom.returncode == 0, dom.stderr[-2000:]
        if shows in dom.stdout or time.monotonic() > deadline:
            break
    shot = subprocess.run([BROWSER, *FLAGS, f"--screenshot={screenshot}", url],
                          capture_output=True, text=True, timeout=120)
    assert shot.returncode == 0, shot.stderr[-2000:]
    return dom.stdout


def text_of(dom: str) -> str:
    dom = re.sub(r"<(style|script)\b.*?</\1>", " ", dom, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom))


def test_the_ui_opens_on_the_runs_table_and_the_run_shows_its_report_and_plots(tmp_path):
    srv = MlflowServer(tmp_path / "mlflow", workers=1).start()
    try:
        proc = run_harness(tmp_path, "op=copy", "impl=eager", "sweep=smoke", "dtype=fp32", "tracking=server",
                           f"tracking.uri={srv.uri}", "isolate=false")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "View run" not in proc.stdout   # MLflow's own line per run, muted
        url = re.search(r"^MLflow: \S+ \((http\S+)\)$", proc.stdout, re.M).group(1)
        experiment, run_id = re.search(r"/experiments/(\d+)/runs/([0-9a-f]{32})\?workflowType=machine_learning$",
                                       url).groups()
        run_name = re.search(r"harness \S+ [0-9a-f]{8}", _run_name(srv.uri, run_id)).group(0)
        shots = tmp_path / "screenshots"
        shots.mkdir()
        base = f"{srv.uri}/#/experiments/{experiment}"
        pages = {"runs": (f"{base}?workflowType=machine_learning", run_name),
                 "report": (f"{base}/runs/{run_id}/artifacts/report.html?workflowType=machine_learning",
                            'class="mlflow-html-iframe"'),
                 "plot": (f"{base}/runs/{run_id}/artifacts/plots/copy-float32-gbps.png?workflowType=machine_learning",
                          'alt="plots/copy-float32-gbps.png"')}
        with ThreadPoolExecutor(len(pages)) as pool:
            doms = dict(zip(pages, pool.map(lambda kv: browse(kv[1][0], shots / f"{kv[0]}.png", kv[1][1]),
                                            pages.items())))
        print(f"screenshots: {shots}")

        runs = text_of(doms["runs"])
        assert "Run Name" in runs and run_name in runs, runs[-3000:]      # the runs table, with the run
        assert "matching runs" in runs and "Detect Issues" not in runs   # not the GenAI overview
        report = text_of(doms["report"])
        assert all(f" {name} " in report for name in ("plots", "report.html", "results.jsonl", "table.txt")), report
        assert 'class="mlflow-html-iframe"' in doms["report"]               # the report, shown in the page
        with urllib.request.urlopen(f"{srv.uri}/get-artifact?path=report.html&run_uuid={run_id}", timeout=30) as f:
            shown = f.read().decode()                                        # what that frame loads
        assert "<h1>harness op=copy impl=eager" in shown and "<th>GB/s (% of roof)</th>" in shown
        assert shown.count("data:image/png;base64,") == 2
        assert 'alt="plots/copy-float32-gbps.png"' in doms["plot"]          # the plot, shown as an image
        for name in pages:
            assert (shots / f"{name}.png").read_bytes().startswith(b"\x89PNG")
    finally:
        srv.stop()


def _run_name(uri: str, run_id: str) -> str:
    from mlflow.tracking import MlflowClient
    return MlflowClient(uri).get_run(run_id).info.run_name
