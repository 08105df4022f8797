"""The MLflow UI as a user opens it, in a real browser: headless Chromium against a real
`mlflow server` on loopback, after a real harness run. Asserts what the pages show (the
address the run prints opens the comparison, impl x shape; the runs table names the run by
what ran) and writes a screenshot of each page under the test's output folder (printed with
-rP). Pages are read through Chromium's DevTools protocol: the report is shown in a frame
loaded from a blob, which no dump of the page's DOM holds.

Skipped where no Chromium is installed, unless HARNESS_REQUIRE_BROWSER=1 (scripts/test sets
it after installing Debian's chromium as root, as CI runs it)."""
import asyncio
import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import time

import pytest

from harness.records.pivot import pct
from harness.records.sinks.console import sig
from tests.helpers import MlflowServer, results, run_harness

BROWSER = next((b for b in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if b), None)
if BROWSER is None and os.environ.get("HARNESS_REQUIRE_BROWSER") == "1":
    raise RuntimeError("HARNESS_REQUIRE_BROWSER=1 but no chromium is installed (apt-get install chromium)")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(BROWSER is None, reason="no chromium installed (apt-get install chromium)")]

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
         "--window-size=1600,1000", "--remote-debugging-port=0"]
# A page is read until it shows what the test looks for, for up to this long: under CI's load
# (two cores, the other tests' processes) the UI's scripts take seconds to fetch the runs.
PAGE_DEADLINE_S = 120
# What a page's text is read as: the page's whole HTML (an image shows only in its alt), each
# frame's visible text.
PAGE_HTML, FRAME_TEXT = "document.documentElement.outerHTML", "document.body ? document.body.innerText : ''"


def browse(pages: dict, shots) -> dict:
    """For each name -> (url, what it must show): (the page's HTML, its frames' texts), read once
    the page or a frame contains that (or the last read at the deadline, for the test's assertion
    to print); a screenshot of each as shots/<name>.png."""
    profile = shots / "profile"
    browser = subprocess.Popen([BROWSER, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for line in browser.stderr:
            if found := re.search(r"DevTools listening on (ws://\S+)", line):
                return asyncio.run(_browse(found.group(1), pages, shots))
        raise AssertionError("chromium gave no DevTools address")
    finally:
        browser.kill()
        browser.wait()


async def _browse(address: str, pages: dict, shots) -> dict:
    import aiohttp   # MLflow's own dependency: a websocket client for the DevTools protocol
    ids, seen = itertools.count(1), {}
    async with aiohttp.ClientSession() as http, http.ws_connect(address, max_msg_size=0) as ws:
        async def call(method, session=None, may_fail=False, **params):
            n = next(ids)
            message = {"id": n, "method": method, "params": params}
            if session:
                message["sessionId"] = session
            await ws.send_json(message)
            while True:
                answer = json.loads((await ws.receive()).data)
                if answer.get("id") == n:
                    assert may_fail or "error" not in answer, (method, answer["error"])
                    return answer.get("result")

        async def text(target_id, expression):
            """What ``expression`` reads in the target; "" where it cannot be read (a frame of the
            page before, closing; a page between two documents)."""
            attached = await call("Target.attachToTarget", may_fail=True, targetId=target_id, flatten=True)
            if attached is None:
                return ""
            value = await call("Runtime.evaluate", attached["sessionId"], may_fail=True, expression=expression)
            await call("Target.detachFromTarget", may_fail=True, sessionId=attached["sessionId"])
            return ((value or {}).get("result") or {}).get("value") or ""

        for name, (url, shows) in pages.items():
            page = (await call("Target.createTarget", url=url))["targetId"]
            deadline = time.monotonic() + PAGE_DEADLINE_S
            while True:
                targets = (await call("Target.getTargets"))["targetInfos"]
                frames = [t["targetId"] for t in targets if t["type"] == "iframe"]   # this page's: one open at a time
                html = await text(page, PAGE_HTML)
                texts = [await text(f, FRAME_TEXT) for f in frames]
                if shows in html or any(shows in t for t in texts) or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.5)
            session = (await call("Target.attachToTarget", targetId=page, flatten=True))["sessionId"]
            png = (await call("Page.captureScreenshot", session))["data"]
            (shots / f"{name}.png").write_bytes(base64.b64decode(png))
            await call("Target.closeTarget", targetId=page)
            seen[name] = (html, texts)
    return seen


def text_of(dom: str) -> str:
    dom = re.sub(r"<(style|script)\b.*?</\1>", " ", dom, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom))


def test_the_address_the_run_prints_opens_the_comparison_of_impls_by_shape(tmp_path):
    """One step from the run's output to the comparison: the printed address opens, in the UI,
    the report's GB/s (% of roof) table, an impl per row and a shape per column, a case that
    did not run named by its status. The runs table names the run by what ran and where."""
    srv = MlflowServer(tmp_path / "mlflow", workers=1).start()
    try:
        proc = run_harness(tmp_path, "op=copy", "impl=all", "shapes=[[1000],[4099]]", "dtype=fp32",
                           "tracking=server", f"tracking.uri={srv.uri}", "isolate=false")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "View run" not in proc.stdout   # MLflow's own line per run, muted
        url = re.search(r"^MLflow: \S+ \((http\S+)\)$", proc.stdout, re.M).group(1)
        experiment, run_id = re.search(r"/experiments/(\d+)/runs/([0-9a-f]{32})/artifacts/report.html"
                                       r"\?workflowType=machine_learning$", url).groups()
        run = _run(srv.uri, run_id)
        impls = ["cuda", "cupy", "eager", "numba", "torch_compile", "triton"]
        assert run.info.run_name == "copy · 6 impls · cpu" and run.data.tags["impl"] == ",".join(impls)
        shots = tmp_path / "screenshots"
        shots.mkdir()
        base = f"{srv.uri}/#/experiments/{experiment}"
        pages = browse({"printed": (url, "GB/s (% of roof)"),
                        "runs": (f"{base}?workflowType=machine_learning", run.info.run_name),
                        "plot": (f"{base}/runs/{run_id}/artifacts/plots/copy-float32-gbps.png?"
                                 "workflowType=machine_learning", 'alt="plots/copy-float32-gbps.png"')}, shots)
        print(f"screenshots: {shots}")

        html, frames = pages["printed"]
        (report,) = [t for t in frames if "GB/s (% of roof)" in t]    # the report, shown at once
        table = report[report.index("copy · float32 · cpu"):]
        rows = {line.split("\t")[0]: line.split("\t")[1:] for line in table.splitlines() if "\t" in line}
        assert rows["GB/s (% of roof)"] == ["1000", "4099"], table
        assert sorted(set(rows) - {"GB/s (% of roof)"}) == impls
        assert rows["cupy"] == ["skipped", "skipped"] and rows["cuda"] == ["skipped", "skipped"]
        eager = {r["shape"][0]: r for r in results(tmp_path) if r["impl"] == "eager"}
        # a rate, its % of roof, and its time's marks where it has some (c: in the CPU's cache)
        assert [re.fullmatch(r"(\S+) \((\S+)%\)(?: [*~c]+)?", cell).groups() for cell in rows["eager"]] == [
            (sig(eager[n]["gbps"]), pct(eager[n]["pct_roof"])) for n in (1000, 4099)]
        assert "Artifacts" in text_of(html) and run.info.run_name in text_of(html)
        runs = text_of(pages["runs"][0])
        assert "Run Name" in runs and run.info.run_name in runs, runs[-3000:]   # the runs table, with the run
        assert "matching runs" in runs and "Detect Issues" not in runs          # not the GenAI overview
        assert 'alt="plots/copy-float32-gbps.png"' in pages["plot"][0]         # the plot, shown as an image
        for name in pages:
            assert (shots / f"{name}.png").read_bytes().startswith(b"\x89PNG")
    finally:
        srv.stop()


def _run(uri: str, run_id: str):
    from mlflow.tracking import MlflowClient
    return MlflowClient(uri).get_run(run_id)
