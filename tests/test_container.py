"""The container path, read from the files: compose.yaml and CI's override against the
compose specification's schema, the Dockerfile through hadolint, the entrypoint's argument
passing for real, and the properties the issues ask for. The image built and run through
compose (on CI's CPU base) is tests/test_compose.py; what only a GPU node can show (the CUDA
image builds, the GPU is given to the container) is not claimed here."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
DOCKERFILE = (ROOT / "docker" / "Dockerfile").read_text()


def tool(name):
    path = shutil.which(name) or (BIN / name if (BIN / name).exists() else None)
    if path is None:
        pytest.fail(f"{name} is not installed (requirements-dev.txt has it)")
    return str(path)


@pytest.mark.parametrize("path", ["compose.yaml", "docker/compose.ci.yaml"])
def test_compose_file_follows_the_compose_specification(path):
    proc = subprocess.run([tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec",
                           str(ROOT / path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ci_override_changes_only_base_pull_network_and_packages():
    """CI's override may set the build's base, Python, lock and wheelhouse, forbid pulls and
    make the network internal; the services' wiring, volumes and GPU reservation stay
    compose.yaml's (compose merges an override into them, it cannot remove them)."""
    ci = yaml.safe_load((ROOT / "docker" / "compose.ci.yaml").read_text())
    assert set(ci) == {"services", "networks"}
    assert ci["networks"] == {"default": {"internal": True}}
    assert set(ci["services"]) == {"harness", "mlflow"}
    assert ci["services"]["mlflow"] == {"pull_policy": "never"}
    harness = ci["services"]["harness"]
    assert set(harness) == {"build", "pull_policy"} and harness["pull_policy"] == "never"
    assert set(harness["build"]) == {"network", "args"}
    assert set(harness["build"]["args"]) == {"BASE", "PYTHON", "REQUIREMENTS", "PIP_NO_INDEX", "PIP_FIND_LINKS"}
    assert harness["build"]["args"]["PIP_FIND_LINKS"].startswith("http://127.0.0.1:")   # the host's loopback only
    for arg in harness["build"]["args"]:
        assert re.search(rf"^ARG {arg}\b", DOCKERFILE, re.M), f"the Dockerfile has no ARG {arg}"


def test_dockerfile_passes_hadolint():
    proc = subprocess.run([tool("hadolint"), str(ROOT / "docker" / "Dockerfile")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("args", [
    ["op=rmsnorm", "impl=all"],
    ["-m", "op=rmsnorm,softmax", "impl=[triton,liger]", "shapes=[[4096, 4096]]", "hydra.run.dir=/results/x y"],
    ["op=copy", "tracking.uri=http://mlflow:5000", "dtype='bf16'", ""],
])
def test_docker_compose_run_arguments_reach_the_cli_unchanged(tmp_path, args):
    """`docker compose run harness ARGS` runs ENTRYPOINT + ARGS: the entrypoint must hand
    ARGS to the harness exactly, and nothing in compose.yaml may replace them."""
    fake = tmp_path / "harness"
    fake.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    fake.chmod(0o755)
    proc = subprocess.run([str(ROOT / "docker" / "entrypoint"), *args], capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == args
    service = COMPOSE["services"]["harness"]
    assert "entrypoint" not in service and "command" not in service
    entry = re.search(r"^ENTRYPOINT (.+)$", DOCKERFILE, re.M).group(1)
    assert json.loads(entry) == ["/opt/kernel-harness/docker/entrypoint"]   # exec form: no shell re-splitting
    assert "COPY . ." in DOCKERFILE and "WORKDIR /opt/kernel-harness" in DOCKERFILE


def test_the_entrypoint_reaches_the_images_other_tools(tmp_path):
    for name in ("mlflow", "harness-upload", "harness-nightly"):
        fake = tmp_path / name
        fake.write_text(f"#!/bin/sh\necho {name} \"$@\"\n")
        fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    out = subprocess.run([str(ROOT / "docker" / "entrypoint"), "mlflow", "server", "--port", "5000"],
                         capture_output=True, text=True, env=env).stdout
    assert out.strip() == "mlflow server --port 5000"


def test_base_image_is_pinned_and_requirements_are_locked_with_hashes():
    base = re.search(r"^ARG BASE=(\S+)$", DOCKERFILE, re.M).group(1)
    assert re.fullmatch(r"nvidia/cuda:13\.0\.\d+-devel-ubuntu24\.04(@sha256:[0-9a-f]{64})?", base), base
    assert (ROOT / "scripts" / "pin-base-image").exists()
    assert "--require-hashes -r /tmp/requirements.lock" in DOCKERFILE
    lock = (ROOT / "docker" / "requirements.lock").read_text()
    entries = re.split(r"\n(?=[a-z0-9])", lock.strip())
    assert len(entries) > 50
    for entry in entries:
        assert re.match(r"^[a-z0-9._-]+(\[[a-z0-9,._-]+\])?==\S+ \\\n", entry), entry[:80]
        assert "--hash=sha256:" in entry, entry[:80]
    pins = dict(re.findall(r"^([a-z0-9._-]+)==(\S+)", lock, re.M))
    assert pins["torch"] == "2.11.0" and pins["triton"] == "3.6.0"   # the GPU host's pair
    assert pins["hydra-core"] == "1.3.8" and pins["omegaconf"].startswith("2.3")
    for name in ("mlflow", "hydra-submitit-launcher", "liger-kernel", "pytest", "nvidia-ml-py"):
        assert name in pins


def test_image_builds_the_extension_for_sm90_and_runs_as_a_non_root_user():
    assert "ENV TORCH_CUDA_ARCH_LIST=9.0" in DOCKERFILE
    assert re.search(r"^RUN if command -v nvcc >/dev/null; then scripts/build-extensions;", DOCKERFILE, re.M)
    user = re.findall(r"^USER (\S+)$", DOCKERFILE, re.M)
    assert user and user[-1].split(":")[0] not in ("root", "0")
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", ".whl"} <= set(ignored)


def test_compose_wires_the_harness_to_a_healthy_mlflow_server():
    harness, mlflow = COMPOSE["services"]["harness"], COMPOSE["services"]["mlflow"]
    assert harness["environment"]["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    assert harness["depends_on"]["mlflow"]["condition"] == "service_healthy"
    device = harness["deploy"]["resources"]["reservations"]["devices"][0]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"] and device["count"] == 1
    assert {v.split(":")[1] for v in harness["volumes"]} == {"/results", "/cache"}
    cmd = mlflow["command"]
    assert cmd[:2] == ["mlflow", "server"]
    arg = {cmd[i]: cmd[i + 1] for i in range(2, len(cmd) - 1) if cmd[i].startswith("--")}
    assert arg["--backend-store-uri"].startswith("sqlite:////mlflow/") and "--serve-artifacts" in cmd
    assert "mlflow" in arg["--allowed-hosts"].split(",") and "localhost:*" in arg["--allowed-hosts"].split(",")
    assert any(v.endswith(":/mlflow") for v in mlflow["volumes"])
    assert "/health" in " ".join(mlflow["healthcheck"]["test"])
    assert mlflow["ports"] == ["${MLFLOW_BIND:-127.0.0.1}:${MLFLOW_PORT:-5000}:5000"]


def test_local_tracking_follows_mlflow_tracking_uri_as_mlflow_does():
    local = yaml.safe_load((ROOT / "conf" / "tracking" / "local.yaml").read_text())
    assert local["uri"] == "${oc.env:MLFLOW_TRACKING_URI,sqlite:///mlflow.db}"


def _docker_ignores(patterns: list[str], path: str) -> bool:
    """Whether a .dockerignore pattern leaves ``path`` out of the build context: a pattern
    matches the path or a folder above it; ``**/`` matches any depth, the top included."""
    import fnmatch
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for p in patterns:
        deep = p.startswith("**/")
        for prefix in prefixes:
            tails = ["/".join(prefix.split("/")[i:]) for i in range(len(prefix.split("/")))] if deep else [prefix]
            if any(fnmatch.fnmatchcase(t, p[3:] if deep else p.rstrip("/")) for t in tails):
                return True
    return False


def test_the_build_context_leaves_out_secrets_and_the_device_cache():
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for path in (".env", "docker/.env", "key.pem", "conf/tls/server.pem", ".device-cache/h100/x.json"):
        assert _docker_ignores(patterns, path), path
    for path in ("harness/commands/cli.py", "conf/config.yaml", "docker/requirements.lock"):
        assert not _docker_ignores(patterns, path), path
