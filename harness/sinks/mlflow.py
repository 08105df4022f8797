"""MLflow, laid out for comparing implementations in the MLflow UI.

    invocation run      one per `harness ...` call (child of tracking.parent_run_id if set)
      series run        one per (op, impl, variant, dtype), the impl labelled with any
                        non-default framework setting (``torch_compile[static]``): metric ``gbps`` (row ops:
                        ``gbps_C<cols>``) with step = compulsory bytes, so a chart of that
                        metric draws GB/s against size, one line per implementation
        case run        one per record: params op/impl/variant/dtype/shape, the impl's
                        launch config as config.<key>, the tuner's table as ``tuning``
                        (JSON); metrics gbps, pct_roof, median_us, errors...; tags
                        status, gpu, record_id

Filter with e.g. ``params.op = 'rmsnorm' and tags.gpu = 'NVIDIA H200'``.
Uploading is idempotent: a case run carries its record's ``harness.record_id``, series and
invocation runs their keys, and a series point is logged only if its step is not there yet,
so uploading the same results.jsonl twice creates nothing new. A case run an outage cut
short (created, never ended: still RUNNING) is deleted and logged again, so that after an
outage every record is on the server once, whole.
A tracking server that does not answer is probed first (5 s) and HTTP retries are bounded,
so a run never hangs on it; the records stay in results.jsonl for ``harness-upload``.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

from harness.record import Record

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
    """A case run's MLflow status, read as the UI colours it: green for what went as it
    should (ok, a skip, a negative control failing as it must), red for what did not (a
    failure, an invalid or broken case, and a negative control that passed: its adversarial
    inputs are too weak). The record's own status is the run's ``status`` tag."""
    if r.negative_control and r.status in ("ok", "fail"):
        return "FINISHED" if r.status == "fail" else "FAILED"
    return "FINISHED" if r.status in ("ok", "skipped") else "FAILED"
CASE_METRICS = ("median_us", "median_lo_us", "median_hi_us", "p10_us", "p90_us", "samples", "late_samples",
                "spin_us", "spread", "graph_us", "gbps",
                "roof_gbps", "pct_roof", "peak_gbps", "pct_peak", "sustained_us", "sustained_gbps",
                "sustained_roof_gbps", "pct_roof_sustained", "max_abs_err", "max_rel_err",
                "tol_used", "n_distinct", "max_ulp_spread", "bytes")
PROVENANCE_TAGS = ("host", "driver", "torch_cuda", "gpu_uuid", "sm_clock_mhz", "sm_clock_max_mhz",
                   "container_image", "git_sha", "git_dirty")


class TrackingUnavailable(RuntimeError):
    pass


def client_env() -> None:
    """MLflow client settings every harness command takes (bounded retries, no "View run"
    lines), unless the user set them."""
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
# MLflow 3 refuses unless MLFLOW_ALLOW_FILE_STORE is set: without this check such a URI ran
# every case and then said "when the server is back", and harness-upload gave a traceback.
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
    (WAL) and syncs the disk at checkpoints rather than at every commit. MLflow's store commits
    about eight times a case, and a sync per commit cost up to 9 ms on this project's CI machine:
    up to 122 ms a case, more than a small case takes to measure (160 cases: 14.5 s of logging,
    then 3.5 s; on a day of cheap syncs 7.5 s, then 6.1 s, for an upload). A crash of the
    machine may lose the last cases' MLflow copies, not the store's consistency; results.jsonl,
    synced at every record, keeps them for harness-upload."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    if not event.contains(Engine, "connect", _write_ahead):
        event.listen(Engine, "connect", _write_ahead)


def _write_ahead(dbapi_connection, _connection_record) -> None:
    import sqlite3
    if not isinstance(dbapi_connection, sqlite3.Connection):
        return
    cursor = dbapi_connection.cursor()
    try:
        files = [row[2] for row in cursor.execute("PRAGMA database_list") if row[1] == "main"]
        if files and files[0] and local_filesystem(Path(files[0])):
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def local_filesystem(path: Path) -> bool:
    """Whether ``path`` is on a filesystem of this machine's own (by /proc/mounts; False where
    that cannot be told)."""
    try:
        mounts = MOUNTS.read_text().splitlines()
    except OSError:
        return False
    target, best, kind = str(path.resolve()), "", None
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind is not None and kind not in NETWORK_FILESYSTEMS


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
            import mlflow  # noqa: F401
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
        self._partial: dict[str, str] = {}   # record id -> a case run left RUNNING (unfinished)
        self._scanned: set[str] = set()

    def _experiment(self, name: str) -> str:
        exp = self.client.get_experiment_by_name(name)
        if exp is not None:
            if exp.tags.get(KIND_TAG) != KIND:
                self.client.set_experiment_tag(exp.experiment_id, KIND_TAG, KIND)
            return exp.experiment_id
        location = None
        if self.uri.startswith("sqlite:///"):
            location = (Path(self.uri[len("sqlite:///"):]).parent / "mlartifacts").as_uri()
        try:
            return self.client.create_experiment(name, artifact_location=location, tags={KIND_TAG: KIND})
        except Exception:  # noqa: BLE001 - created meanwhile by a concurrent job
            exp = self.client.get_experiment_by_name(name)
            if exp is None:
                raise
            return exp.experiment_id

    # --- finding what is already there ---------------------------------------------
    def _scan(self, invocation_id: str) -> None:
        """Learn the runs an earlier upload of this invocation made (one paged search)."""
        if invocation_id in self._scanned:
            return
        self._scanned.add(invocation_id)
        for run in search_all(self.client, [self.experiment_id], f"tags.`harness.invocation_id` = '{invocation_id}'"):
            tags = run.data.tags
            kind = tags.get("harness.kind")
            if kind == "invocation":
                self._invocations[invocation_id] = run.info.run_id
            elif kind == "series":
                self._series[(invocation_id, tags.get("harness.series"))] = run.info.run_id
                if not run.data.params:   # cut between its creation and its params
                    self._series_params(run.info.run_id, *(tags.get(k) for k in ("op", "impl", "variant", "dtype")))
            elif kind == "case" and run.info.status == "RUNNING":
                # cut by an outage between its creation and its end: replaced when logged
                self._partial[tags.get("harness.record_id")] = run.info.run_id
            elif kind == "case":
                self._records.add(tags.get("harness.record_id"))

    # --- creating runs --------------------------------------------------------------
    def invocation_run(self, invocation_id: str, first: Record) -> str:
        self._scan(invocation_id)
        if invocation_id in self._invocations:
            return self._invocations[invocation_id]
        prov = first.provenance or {}
        tags = {**self.common_tags, "harness.kind": "invocation", "harness.invocation_id": invocation_id,
                "gpu": prov.get("gpu_name") or "cpu", "device": first.device,
                "git_sha": str(prov.get("git_sha")), "mlflow.source.name": "kernel-harness"}
        if self.parent_run_id:
            tags["mlflow.parentRunId"] = self.parent_run_id
        run = self.client.create_run(self.experiment_id, start_time=_ms(first.timestamp), tags=tags,
                                     run_name=f"harness {first.timestamp[:19]} {invocation_id[:8]}")
        run_id = run.info.run_id
        self._invocations[invocation_id] = run_id
        return run_id

    def _series_run(self, r: Record) -> str:
        series = "|".join(r.series_key)
        key = (r.invocation_id, series)
        if key not in self._series:
            parent = self.invocation_run(r.invocation_id, r)
            gpu = (r.provenance or {}).get("gpu_name") or "cpu"
            tags = {**self.common_tags, "harness.kind": "series", "harness.invocation_id": r.invocation_id,
                    "harness.series": series, "mlflow.parentRunId": parent, "op": r.op,
                    "impl": r.impl, "variant": r.variant, "dtype": r.dtype, "gpu": gpu}
            run = self.client.create_run(self.experiment_id, start_time=_ms(r.timestamp), tags=tags,
                                         run_name=f"{r.op} · {r.impl_label} · {r.dtype}")
            self._series[key] = run.info.run_id
            self._series_params(run.info.run_id, r.op, r.impl, r.variant, r.dtype)
        return self._series[key]

    def _series_params(self, run_id: str, op: str, impl: str, variant: str, dtype: str) -> None:
        from mlflow.entities import Param
        self.client.log_batch(run_id, params=[Param("op", op), Param("impl", impl), Param("variant", variant),
                                              Param("dtype", dtype)])

    def log(self, r: Record) -> bool:
        """Log one record; False if it was there already. Cut (an outage, a SIGINT), it may
        leave runs half made: what this logger knows of the invocation is dropped, so that
        logging the record again finds them on the server (``_scan``), replaces its case
        run and adds no series point twice."""
        try:
            return self._log(r)
        except BaseException:
            self._scanned.discard(r.invocation_id)
            self._series_steps.clear()
            raise

    def _log(self, r: Record) -> bool:
        from mlflow.entities import Metric, Param

        self._scan(r.invocation_id)
        if r.record_id in self._records:
            return False
        if r.record_id in self._partial:   # ended first: a deleted run left RUNNING is still RUNNING in the store
            cut = self._partial.pop(r.record_id)
            self.client.set_terminated(cut, "KILLED")
            self.client.delete_run(cut)
        series_id = self._series_run(r)
        ts = _ms(r.timestamp)
        prov = r.provenance or {}
        gpu = prov.get("gpu_name") or "cpu"
        params = {"op": r.op, "impl": r.impl, "variant": r.variant, "dtype": r.dtype,
                  "shape": r.shape_str, "device": r.device, "seed": r.seed,
                  "bytes_read": r.bytes_read, "bytes_written": r.bytes_written,
                  **{f"op.{k}": v for k, v in (r.params or {}).items()}}
        params.update({f"config.{k}": v for k, v in (r.impl_config or {}).items()})
        if r.tuning:
            table = json.dumps(r.tuning, separators=(",", ":"))
            params["tuning"] = table if len(table) <= MAX_PARAM else f"{len(table)} characters: in results.jsonl"
        if len(r.shape) == 2:
            params.update(rows=r.shape[0], cols=r.shape[1])
        else:
            params.update(n=r.shape[0])
        metrics = {k: getattr(r, k) for k in CASE_METRICS if getattr(r, k) is not None}
        for flag in ("passed", "deterministic", "batch_invariant"):
            if getattr(r, flag) is not None:
                metrics[flag] = float(bool(getattr(r, flag)))
        tags = {**self.common_tags, "harness.kind": "case", "harness.invocation_id": r.invocation_id,
                "harness.record_id": r.record_id, "mlflow.parentRunId": series_id,
                "status": r.status, "reason": r.reason[:5000], "gpu": gpu, "timer": r.timer,
                "roof_kind": r.roof_kind, "roof_source": r.roof_source,
                "negative_control": str(r.negative_control).lower(), **({"role": r.role} if r.role else {}),
                **({"clock_note": r.clock_note} if r.clock_note else {}),
                **{k: str(prov.get(k)) for k in PROVENANCE_TAGS if prov.get(k) is not None}}
        run = self.client.create_run(self.experiment_id, start_time=ts, tags=tags,
                                     run_name=r.case_label)
        run_id = run.info.run_id
        self.client.log_batch(
            run_id,
            metrics=[Metric(k, float(v), ts, 0) for k, v in metrics.items()],
            params=[Param(k, str(v)[:MAX_PARAM]) for k, v in params.items()],
            tags=[])
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
        seen = self._series_steps.get((series_id, key))
        if seen is None:
            seen = {m.step for m in self.client.get_metric_history(series_id, key)}
            self._series_steps[(series_id, key)] = seen
        if r.bytes in seen:
            return
        points = [Metric(key, float(r.gbps), ts, r.bytes)]
        if r.pct_roof is not None:
            points.append(Metric(f"pct_roof{suffix}", float(r.pct_roof), ts, r.bytes))
        self.client.log_batch(series_id, metrics=points)
        seen.add(r.bytes)

    def finish(self, invocation_id: str, artifacts: list[Path], summary: dict[str, float],
               status: str = "FINISHED") -> None:
        """Close the invocation run: its summary metrics, its artifacts, and its MLflow
        status (KILLED for a run a SIGINT cut short: the UI then says it did not finish)."""
        run_id = self._invocations.get(invocation_id)
        if run_id is None:
            return
        from mlflow.entities import Metric
        now = int(time.time() * 1000)
        self.client.log_batch(run_id, metrics=[Metric(k, float(v), now, 0) for k, v in summary.items()])
        for path in map(Path, artifacts):
            if path.is_dir():
                self.client.log_artifacts(run_id, str(path), artifact_path=path.name)
            elif path.exists():
                self.client.log_artifact(run_id, str(path))
        self.end(invocation_id, status)

    def end(self, invocation_id: str, status: str) -> None:
        """End the invocation run and its series runs with ``status``, nothing else logged (what
        a run whose logging a second SIGINT stopped still does: else the UI shows it RUNNING)."""
        run_id = self._invocations.get(invocation_id)
        if run_id is None:
            return
        self.close_series(invocation_id, status)
        self.client.set_terminated(run_id, status)

    def close_series(self, invocation_id: str, status: str = "FINISHED") -> None:
        """End the invocation's series runs that are still RUNNING (the UI shows them so forever)."""
        for (inv, _series), run_id in self._series.items():
            if inv == invocation_id and self.client.get_run(run_id).info.status == "RUNNING":
                self.client.set_terminated(run_id, status)

    def run_url(self, invocation_id: str) -> str | None:
        run_id = self._invocations.get(invocation_id)
        if run_id is None:
            return None
        if self.uri.startswith("http"):
            return f"{self.uri.rstrip('/')}/#/experiments/{self.experiment_id}/runs/{run_id}?{ML_VIEW}"
        return f"experiment {self.experiment_id}, run {run_id}"

    def experiment_path(self) -> str:
        """The UI's path to this experiment's runs table (append it to the UI's address)."""
        return f"/#/experiments/{self.experiment_id}?{ML_VIEW}"


def upload(records: list[Record], uri: str, experiment: str, parent_run_id: str | None = None,
           group: str | None = None) -> tuple[int, int]:
    """Upload records (from one or more invocations); returns (new, already there)."""
    logger = MlflowLogger(uri, experiment, parent_run_id, group)
    new = old = 0
    for r in records:
        if logger.log(r):
            new += 1
        else:
            old += 1
    for inv in {r.invocation_id for r in records}:
        logger.close_series(inv)
        run_id = logger._invocations.get(inv)
        if run_id:
            run = logger.client.get_run(run_id)
            if run.info.status == "RUNNING":
                logger.client.set_terminated(run_id, "FINISHED")
    return new, old
