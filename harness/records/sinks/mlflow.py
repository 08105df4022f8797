"""MLflow, laid out for comparing implementations in the MLflow UI.

    invocation run   one per `harness ...` call (under tracking.parent_run_id if set), named by
                     what ran where (``rmsnorm · cuda, triton · NVIDIA H200``): the console's
                     counts, report.html (impl x shape: the address the run prints opens it), plots
      series run     one per (op, series, variant, dtype), the series the impl labelled with a
                     non-default setting (``impl[value]``): ``gbps`` (row ops: ``gbps_C<cols>``) with
                     step = compulsory bytes, a chart of GB/s against size, a line per impl
        case run     one per record: params op/impl/series/variant/dtype/shape, config.<key> (and its
                     source); metrics gbps, pct_roof, median_us, errors...; tags status, gpu, record_id

Uploading is idempotent: runs carry their record's or series' key, a series point is logged
only if its step is not there yet, and a case run an outage or a SIGINT cut (still RUNNING)
is deleted and logged again, whole.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
import urllib.error
import urllib.request
from collections import Counter
from datetime import datetime
from pathlib import Path

from harness.records.record import INTERRUPTED, NOT_RUN, Record, impl_label
from harness.records.sinks.console import status_label

# MLflow's client retries an unreachable server for minutes per call by default.
BOUNDED_RETRIES = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                   "MLFLOW_HTTP_REQUEST_TIMEOUT": "15", "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5"}

# MLflow's client prints "View run ... at: URL" for each run it ends against a server (two
# lines a case); the harness prints the invocation's address once.
QUIET = {"MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}

MAX_PARAM = 6000   # MLflow's limit on a param value
# MLflow 3's UI opens an experiment on what this tag names (without it, on its GenAI pages:
# traces and an assistant); runs and their metrics are what this experiment holds.
KIND_TAG, KIND = "mlflow.experimentKind", "custom_model_development"
# ... and on the 'Model training' side (its runs table, not traces) where a link asks for it:
# the GenAI / Model training switch is the browser's own setting otherwise.
ML_VIEW = "workflowType=machine_learning"


def run_status(r: Record) -> str:
    """A case run's MLflow status, as the UI colours it: green for what went as it should (ok, a
    skip, a negative control failing as it must), red for what did not (a failure, an invalid or
    broken case, a negative control passing: its inputs are too weak), KILLED for a case a
    SIGINT cut. The record's own status is the run's ``status`` tag."""
    if r.reason == INTERRUPTED:
        return "KILLED"
    if r.negative_control and r.status in ("ok", "fail"):
        return "FINISHED" if r.status == "fail" else "FAILED"
    return "FINISHED" if r.status in ("ok", "skipped") else "FAILED"


def describe(records: list[Record]) -> dict[str, str]:
    """An invocation run's name and tags: what ran (ops, impls) and where (GPU, commit), the
    provenance from the first record that has one (a skipped case's has none)."""
    prov, device = next((r.provenance for r in records if r.provenance), {}), records[0].device or "cpu"
    ops, impls = (sorted({getattr(r, k) for r in records}) for k in ("op", "impl"))
    what = [", ".join(n) if len(n) <= 4 else f"{len(n)} {kind}" for n, kind in ((ops, "ops"), (impls, "impls"))]
    return {"mlflow.runName": " · ".join([*what, prov.get("gpu_name") or device]), "op": ",".join(ops),
            "impl": ",".join(impls), "gpu": prov.get("gpu_name") or "cpu", "device": device,
            **({"git_sha": str(prov["git_sha"])} if prov.get("git_sha") else {})}


def counts(records: list[Record], interrupted: bool = False) -> tuple[dict[str, int], str]:
    """An invocation's metrics, counted as the console counts (xfail and XPASS apart), and its
    status: KILLED where cases did not run, cut by a SIGINT or never reached by a killed run (a
    record names the size of its invocation's plan; the killed run's file lacks the rest)."""
    have, last = Counter(r.invocation_id for r in records), {r.invocation_id: r for r in records}
    not_run = sum(r.reason == NOT_RUN for r in records) + sum(max(0, r.plan_cases - have[i]) for i, r in last.items())
    metrics = {f"n_{k.lower()}": n for k, n in Counter(map(status_label, records)).items()}
    metrics.update(n_not_run=not_run, interrupted=int(interrupted or not_run > 0))
    return metrics, "KILLED" if metrics["interrupted"] else "FINISHED"


CASE_METRICS = ("median_us", "median_lo_us", "median_hi_us", "p10_us", "p90_us", "samples", "late_samples",
                "spin_us", "spread", "graph_us", "gbps", "roof_gbps", "pct_roof", "peak_gbps", "pct_peak",
                "sustained_us", "sustained_gbps", "sustained_roof_gbps", "pct_roof_sustained", "max_abs_err",
                "max_rel_err", "tol_used", "n_distinct", "max_ulp_spread", "bytes")
PROVENANCE_TAGS = ("host", "driver", "torch_cuda", "gpu_uuid", "sm_clock_mhz", "sm_clock_max_mhz",
                   "container_image", "git_sha", "git_dirty")


class TrackingUnavailable(RuntimeError):
    pass


def client_env() -> None:
    """MLflow client settings every harness command takes, unless the user set them."""
    for k, v in {**BOUNDED_RETRIES, **QUIET}.items():
        os.environ.setdefault(k, v)


def search_all(client, experiment_ids: list[str], filter_string: str, order_by: list[str] | None = None):
    """Every run a search finds, across its pages (5000 a page)."""
    token = None
    while True:
        page = client.search_runs(experiment_ids, filter_string, max_results=5000, page_token=token,
                                  order_by=order_by)
        yield from page
        token = page.token
        if not token:
            return


def explain(e: BaseException, limit: int = 240) -> str:
    """What went wrong with the tracking server, in one whole sentence: MLflow's own message
    nests urllib3's (host, url, connection object) and runs to 400+ characters."""
    text = str(e).strip()
    errno = re.search(r"\[Errno (-?\d+)\] ([^\"'()]+)", text)
    api = re.search(r"API request to (\S+) failed", text)
    if api and errno:
        return f"{api.group(1)} did not answer ({errno.group(2).strip()}, errno {errno.group(1)})"
    if api and re.search(r"timed? ?out", text, re.I):
        return f"{api.group(1)} did not answer in time"
    first = f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"
    if "unable to open database file" in text:
        return SQLITE_UNUSABLE.format(why="its path is a folder, or its folder cannot be written")
    if len(first) <= limit:
        return first
    cut = first[:limit]
    end = max(cut.rfind(". "), cut.rfind("; "))
    return (cut[:end + 1] if end > 0 else cut[:cut.rfind(" ")]) + " [...]"


def normalize_uri(uri: str) -> str:
    """A relative sqlite path becomes absolute, so the store does not move with the cwd."""
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        path = Path(uri[len("sqlite:///"):]).resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{path}"
    return uri


SQLITE_UNUSABLE = ("the sqlite store cannot be opened ({why}): give tracking.uri a file, "
                   "sqlite:////an/absolute/path/mlflow.db, in a folder you can write")

# The schemes MLflow has a tracking store for (its registry's list), drivers after '+'
# (postgresql+psycopg2). A path without a scheme, or file:, is MLflow's file store, which
# MLflow 3 refuses unless MLFLOW_ALLOW_FILE_STORE is set.
STORE_SCHEMES = ("sqlite", "http", "https", "postgresql", "mysql", "mssql", "databricks", "databricks-uc", "uc")
FILE_SCHEMES = ("", "file")


def uri_problem(uri: str) -> str | None:
    """Why ``uri`` cannot be an MLflow tracking store, or None."""
    from urllib.parse import urlsplit
    scheme = urlsplit(uri).scheme.split("+")[0].lower() if uri else ""
    if scheme in STORE_SCHEMES:
        return None
    if scheme in FILE_SCHEMES and uri and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() in ("true", "1"):
        return None
    what = "a path (MLflow's file store, which MLflow 3 refuses)" if scheme in FILE_SCHEMES else f"scheme {scheme!r}"
    return (f"{uri!r} is not an MLflow tracking URI ({what}); give sqlite:///path/to/mlflow.db (a local file) "
            "or http://host:port (a server)")


def probe(uri: str, timeout: float = 5.0) -> None:
    """A TrackingUnavailable, at once, for a store that cannot answer: MLflow retries a
    server, and an sqlite file it cannot open, for minutes before it gives up."""
    if uri.startswith("sqlite:///"):
        path = Path(uri[len("sqlite:///"):])
        if path.exists() and not path.is_file():
            raise TrackingUnavailable(SQLITE_UNUSABLE.format(why=f"{path} is not a file"))
        if path.parent.is_dir() and not os.access(path.parent, os.W_OK):
            raise TrackingUnavailable(SQLITE_UNUSABLE.format(why=f"{path.parent} cannot be written"))
        return
    if not uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout) as resp:
            if resp.status != 200:
                raise TrackingUnavailable(f"{uri}/health answered HTTP {resp.status}")
    except (urllib.error.URLError, OSError) as e:
        raise TrackingUnavailable(f"tracking server {uri} is unreachable: {e}") from None


# Filesystems where sqlite's write-ahead log must not be used (its index is shared memory,
# which hosts cannot share): there the store keeps sqlite's defaults.
MOUNTS = Path("/proc/mounts")
NETWORK_FILESYSTEMS = {"nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph", "glusterfs",
                       "fuse.sshfs", "fuse.glusterfs", "9p", "afs", "davfs"}


def fast_sqlite_commits() -> None:
    """Every sqlite store on a local disk that this process opens from now on writes ahead
    (WAL) and syncs the disk at checkpoints, not at each of MLflow's eight commits a case (up to
    9 ms a sync on this project's CI machine: more than a small case takes to measure). A crash
    of the machine may lose the last cases' MLflow copies, which results.jsonl keeps."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    if not event.contains(Engine, "connect", _write_ahead):
        event.listen(Engine, "connect", _write_ahead)


def _write_ahead(dbapi_connection, _connection_record) -> None:
    import sqlite3
    if not isinstance(dbapi_connection, sqlite3.Connection):
        return
    with contextlib.closing(dbapi_connection.cursor()) as cursor:
        files = [row[2] for row in cursor.execute("PRAGMA database_list") if row[1] == "main"]
        if files and files[0] and local_filesystem(Path(files[0])):
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")


def local_filesystem(path: Path) -> bool:
    """Whether ``path`` is on a filesystem of this machine's own (by /proc/mounts; False where
    that cannot be told)."""
    try:
        mounts = [line.split()[1:3] for line in MOUNTS.read_text().splitlines()]
    except OSError:
        return False
    target = str(path.resolve())
    inside = [(len(point), n, kind) for n, (point, kind) in enumerate((m[0].replace("\\040", " "), m[1])
                                                                     for m in mounts if len(m) == 2)
              if target == point or target.startswith(point.rstrip("/") + "/")]
    return bool(inside) and max(inside)[2] not in NETWORK_FILESYSTEMS   # the last-mounted deepest


def _ms(ts: str) -> int:
    try:
        return int(datetime.fromisoformat(ts).timestamp() * 1000)
    except (TypeError, ValueError):
        return int(time.time() * 1000)


@contextlib.contextmanager
def store_lock(uri: str):
    """Held while MLflow opens a store: it creates and migrates a new sqlite store's tables
    unlocked, and two runs opening one at once broke it, at times for good ("duplicate column
    name"). A file beside the store: closing a descriptor of the store drops sqlite's own locks."""
    sqlite = uri.startswith("sqlite:///")
    with open(uri[len("sqlite:///"):] + ".lock", "a") if sqlite else contextlib.nullcontext() as f:
        if sqlite:
            fcntl.flock(f, fcntl.LOCK_EX)   # released as the file closes
        yield


class MlflowLogger:
    def __init__(self, uri: str, experiment: str, parent_run_id: str | None = None,
                 group: str | None = None):
        client_env()
        self.uri = normalize_uri(uri)
        probe(self.uri)
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise TrackingUnavailable("mlflow is not installed (pip install mlflow)") from None
        if self.uri.startswith("sqlite:"):
            fast_sqlite_commits()
        with store_lock(self.uri):
            self.client = MlflowClient(tracking_uri=self.uri)
            self.experiment_id = self._experiment(experiment)
        self.parent_run_id = parent_run_id or None
        # Tags on every run of an invocation: its parent (the nightly job's run) and group,
        # so that the regression check can find a night's cases, and all nights' cases.
        self.common_tags = {k: v for k, v in (("harness.parent", self.parent_run_id),
                                              ("harness.group", group or None)) if v}
        self._invocations: dict[str, str] = {}
        self._series: dict[tuple, str] = {}
        self._series_steps: dict[tuple[str, str], set[int]] = {}
        self._records: set[str] = set()
        self._scanned: set[str] = set()
        self._cut: set[str] = set()          # invocations a log was cut in: scanned again at their end

    def _experiment(self, name: str) -> str:
        exp = self.client.get_experiment_by_name(name)
        if exp is not None:
            if exp.tags.get(KIND_TAG) != KIND:
                self.client.set_experiment_tag(exp.experiment_id, KIND_TAG, KIND)
            return exp.experiment_id
        location = (Path(self.uri[len("sqlite:///"):]).parent / "mlartifacts").as_uri() \
            if self.uri.startswith("sqlite:///") else None
        try:
            return self.client.create_experiment(name, artifact_location=location, tags={KIND_TAG: KIND})
        except Exception:  # noqa: BLE001 - created meanwhile by a concurrent job
            exp = self.client.get_experiment_by_name(name)
            if exp is None:
                raise
            return exp.experiment_id

    def _scan(self, invocation_id: str) -> None:
        """Learn the runs an earlier upload of this invocation made (one paged search). A case run
        still RUNNING was cut before its end (an outage, a SIGINT, a cut request a server carried
        out after its record was logged again): it is deleted, its record logged again whole."""
        if invocation_id in self._scanned:
            return
        self._scanned.add(invocation_id)
        for run in search_all(self.client, [self.experiment_id], f"tags.`harness.invocation_id` = '{invocation_id}'"):
            tags, kind = run.data.tags, run.data.tags.get("harness.kind")
            if kind == "invocation":
                self._invocations[invocation_id] = run.info.run_id
            elif kind == "series":
                self._series[(invocation_id, tags.get("harness.series"))] = run.info.run_id
                if not run.data.params:   # cut between its creation and its params
                    self._series_params(run.info.run_id, tags)
            elif kind == "case" and run.info.status == "RUNNING":   # ended first: a deleted run stays RUNNING
                self.client.set_terminated(run.info.run_id, "KILLED")
                self.client.delete_run(run.info.run_id)
            elif kind == "case":
                self._records.add(tags.get("harness.record_id"))

    def _series_run(self, r: Record) -> str:
        series = "|".join(r.series_key)
        key = (r.invocation_id, series)
        if key not in self._series:
            if (parent := self._invocations.get(r.invocation_id)) is None:
                tags = {**self.common_tags, **describe([r]), "harness.kind": "invocation", "harness.invocation_id":
                        r.invocation_id, "mlflow.source.name": "kernel-harness",
                        **({"mlflow.parentRunId": self.parent_run_id} if self.parent_run_id else {})}
                parent = self.client.create_run(self.experiment_id, start_time=_ms(r.timestamp), tags=tags).info.run_id
                self._invocations[r.invocation_id] = parent
            tags = {**self.common_tags, "harness.kind": "series", "harness.invocation_id": r.invocation_id,
                    "harness.series": series, "mlflow.parentRunId": parent, "op": r.op, "impl": r.impl,
                    "series": r.series, "variant": r.variant, "dtype": r.dtype,
                    "gpu": (r.provenance or {}).get("gpu_name") or "cpu"}
            run = self.client.create_run(self.experiment_id, start_time=_ms(r.timestamp), tags=tags,
                                         run_name=f"{r.op} · {impl_label(r.series, r.variant)} · {r.dtype}")
            self._series[key] = run.info.run_id
            self._series_params(run.info.run_id, tags)
        return self._series[key]

    def _series_params(self, run_id: str, tags: dict) -> None:
        from mlflow.entities import Param
        self.client.log_batch(run_id, params=[Param(k, tags[k]) for k in ("op", "impl", "series", "variant", "dtype")
                                              if k in tags])

    def log(self, r: Record) -> bool:
        """Log one record; False if it was there already. Cut (an outage, a SIGINT), it may leave
        runs half made: what this logger knows of the invocation is dropped, so that logging the
        record again finds them (``_scan``), replaces its case run, adds no series point twice."""
        try:
            return self._log(r)
        except BaseException:
            self._scanned.discard(r.invocation_id)
            self._cut.add(r.invocation_id)
            self._series_steps.clear()
            raise

    def _log(self, r: Record) -> bool:
        from mlflow.entities import Metric, Param

        self._scan(r.invocation_id)
        if r.record_id in self._records:
            return False
        series_id = self._series_run(r)
        ts, prov = _ms(r.timestamp), r.provenance or {}
        params = {"op": r.op, "impl": r.impl, "series": r.series, "variant": r.variant, "dtype": r.dtype,
                  "shape": r.shape_str, "device": r.device, "seed": r.seed,
                  "bytes_read": r.bytes_read, "bytes_written": r.bytes_written,
                  **{f"op.{k}": v for k, v in (r.params or {}).items()}}
        params.update({f"config.{k}": v for k, v in (r.impl_config or {}).items()})
        params.update(dict(zip(("rows", "cols"), r.shape)) if len(r.shape) == 2 else {"n": r.shape[0]})
        metrics = {k: getattr(r, k) for k in CASE_METRICS if getattr(r, k) is not None}
        metrics.update({f: float(bool(getattr(r, f))) for f in ("passed", "deterministic", "batch_invariant")
                        if getattr(r, f) is not None})
        tags = {**self.common_tags, "harness.kind": "case", "harness.invocation_id": r.invocation_id,
                "harness.record_id": r.record_id, "mlflow.parentRunId": series_id,
                "status": r.status, "reason": r.reason[:5000], "gpu": prov.get("gpu_name") or "cpu", "timer": r.timer,
                "roof_kind": r.roof_kind, "roof_source": r.roof_source,
                "negative_control": str(r.negative_control).lower(), **({"role": r.role} if r.role else {}),
                **({"clock_note": r.clock_note} if r.clock_note else {}),
                **{k: str(prov.get(k)) for k in PROVENANCE_TAGS if prov.get(k) is not None}}
        run_id = self.client.create_run(self.experiment_id, start_time=ts, tags=tags, run_name=r.case_label).info.run_id
        self.client.log_batch(run_id, metrics=[Metric(k, float(v), ts, 0) for k, v in metrics.items()],
                              params=[Param(k, str(v)[:MAX_PARAM]) for k, v in params.items()])
        if r.gbps is not None:
            self._series_point(series_id, r, ts)
        # Ended last: a case run that is not RUNNING is whole, its series point included.
        self.client.set_terminated(run_id, run_status(r), end_time=ts + 1)
        self._records.add(r.record_id)
        return True

    def _series_point(self, series_id: str, r: Record, ts: int) -> None:
        """One point of GB/s against size; row ops get one line per row length."""
        from mlflow.entities import Metric

        suffix = f"_C{r.shape[1]}" if len(r.shape) == 2 else ""
        key = f"gbps{suffix}"
        if (seen := self._series_steps.get((series_id, key))) is None:
            seen = {m.step for m in self.client.get_metric_history(series_id, key)}
            self._series_steps[(series_id, key)] = seen
        if r.bytes in seen:
            return
        points = [Metric(key, float(r.gbps), ts, r.bytes)]
        if r.pct_roof is not None:
            points.append(Metric(f"pct_roof{suffix}", float(r.pct_roof), ts, r.bytes))
        self.client.log_batch(series_id, metrics=points)
        seen.add(r.bytes)

    def finish(self, invocation_id: str, records: list[Record], artifacts=(), interrupted: bool = False,
               status: str | None = None) -> None:
        """Close the invocation run as its records tell it (``describe``, ``counts``), with its
        artifacts (``status``: FAILED where the run could not write its records); a run ended already
        (its records uploaded again) only has its series ended."""
        run_id = self._invocations.get(invocation_id)
        if run_id is None:
            return
        metrics, counted = counts(records, interrupted)
        status = status or counted
        if self.client.get_run(run_id).info.status == "RUNNING":
            from mlflow.entities import Metric, RunTag
            now = int(time.time() * 1000)
            self.client.log_batch(run_id, metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()],
                                  tags=[RunTag(k, v) for k, v in (describe(records) if records else {}).items()])
            for path in map(Path, artifacts):
                if path.is_dir():
                    self.client.log_artifacts(run_id, str(path), artifact_path=path.name)
                elif path.exists():
                    self.client.log_artifact(run_id, str(path))
        self.end(invocation_id, status)

    def end(self, invocation_id: str, status: str) -> None:
        """End the invocation run and its series runs still RUNNING (else so in the UI for ever) with
        ``status``: all a logger a second SIGINT stopped still does. After a cut log, ``_scan`` again."""
        if invocation_id in self._cut:
            self._scanned.discard(invocation_id)
            self._scan(invocation_id)
        runs = [run_id for (inv, _series), run_id in self._series.items() if inv == invocation_id]
        for run_id in [*runs, self._invocations.get(invocation_id)]:
            if run_id and self.client.get_run(run_id).info.status == "RUNNING":
                self.client.set_terminated(run_id, status)

    def ui_path(self, invocation_id: str, artifact: str | None = None) -> str:
        """The UI's path (after its address) to the invocation run, opened on ``artifact``
        (report.html: the comparison, impl x shape); to the experiment's runs where it has none."""
        run_id = self._invocations.get(invocation_id)
        where = "" if run_id is None else f"/runs/{run_id}" + (f"/artifacts/{artifact}" if artifact else "")
        return f"/#/experiments/{self.experiment_id}{where}?{ML_VIEW}"


def upload(records: list[Record], uri: str, experiment: str, parent_run_id: str | None = None,
           group: str | None = None) -> tuple[int, int]:
    """Upload records (from one or more invocations); returns (new, already there). A run never
    ended (its harness killed, or its store down) is ended as its records tell it (``finish``)."""
    logger = MlflowLogger(uri, experiment, parent_run_id, group)
    new = sum(logger.log(r) for r in records)
    for inv in dict.fromkeys(r.invocation_id for r in records):
        logger.finish(inv, [r for r in records if r.invocation_id == inv])
    return new, len(records) - new
