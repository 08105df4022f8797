"""Building the CUDA C++ kernels: every ``impls/<op>/*.cu`` into one PyTorch extension library,
once per machine and source hash, outside any timed region.

The library's ops register themselves under ``torch.ops.harness_cuda`` (each ``.cu`` has a
``TORCH_LIBRARY_FRAGMENT``), so no binding file lists them. A build is kept in a folder named
by the hash of what decides the binary (the sources and headers, the flags, the target
architectures, torch's and nvcc's versions): ``$HARNESS_CACHE/cuda/<hash>/``, or, where an image
built it ahead (``scripts/build-extensions``), ``$HARNESS_EXTENSIONS_DIR/<hash>/``. A kept build
loads in well under a second; a fresh one compiles the sources in parallel (ninja).

A run starts the build at its start (``start``, from the framework's ``warm``: a thread of the
harness's process, while other cases run), and a bind that needs it waits for it: a build
folder is built by one thread or process at a time (a lock file), the others wait and take
its library. A build that failed leaves its message in the folder for the rest of that run
(``TOKEN_ENV``), so that its cases are skipped with the compiler's words without building
again; the next run tries again.

No ``--use_fast_math``: it flushes subnormals to zero and approximates exp and division, which
the ops' checks (softmax ``large_magnitude``, copy's subnormals) would catch as wrong answers.
``-lineinfo`` lets compute-sanitizer and ncu name source lines; it does not change the code.

    python -m impls._frameworks.cuda.build [--out DIR]     # build (or find) it, print where
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness.registry import Unavailable

HERE = Path(__file__).resolve().parent
IMPLS = HERE.parent.parent
NAME = "harness_cuda"
FLAGS = ["-O3", "-lineinfo"]   # the C++ standard is the one torch builds its extensions with
ARCH_ENV = "HARNESS_CUDA_ARCH"   # e.g. "9.0" (default: the H100/H200), "9.0 10.0"
DEFAULT_ARCH = "9.0"
MIN_MAJOR = 8                         # __hmax2_nan, createpolicy / .L2::cache_hint: sm_80 and newer
PREBUILT_ENV = "HARNESS_EXTENSIONS_DIR"
TOKEN_ENV = "HARNESS_CUDA_BUILD_RUN"   # one value per run (its workers inherit it): a failure is not retried in it
FAILED = "build-failed"               # in the build folder: the run's token, then the failure's message
LOCK = "build.lock"
DONE = "build-seconds"                # written once the library is linked and loads: the build is whole
TORCH_BATON = "lock"                  # torch's cpp_extension lock file, left behind by a build that was killed


class BuildError(Unavailable):
    """The kernels could not be built or loaded here; the message says why and what to do.
    Raised at bind, it makes the case a skipped one with this reason (harness.registry)."""


def sources() -> list[Path]:
    return sorted(IMPLS.glob("*/*.cu"))


def headers() -> list[Path]:
    """The shared headers here and each op's kernels header (impls/<op>/<op>.cuh)."""
    return sorted(HERE.glob("*.cuh")) + sorted(IMPLS.glob("*/*.cuh"))


def arch() -> str:
    value = os.environ.get(ARCH_ENV, DEFAULT_ARCH).strip()
    for a in value.split():
        major, _, minor = a.partition(".")
        if not (major.isdigit() and minor.rstrip("+PTX").isdigit()):
            raise BuildError(f"{ARCH_ENV}={value!r}: give compute capabilities like '9.0' or '9.0 10.0'")
        if int(major) < MIN_MAJOR:
            raise BuildError(f"{ARCH_ENV}={value!r}: the kernels use instructions of compute capability 8.0 and "
                             "newer (max.NaN on 16-bit pairs, L2 cache hints); give 8.0 or newer, e.g. '9.0'")
    return value


def nvcc() -> str | None:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    found = Path(home, "bin", "nvcc") if home else None
    return str(found) if found and found.exists() else shutil.which("nvcc")


@functools.cache
def nvcc_version() -> str:
    compiler = nvcc()
    if compiler is None:
        raise BuildError("nvcc was not found (set CUDA_HOME or put nvcc on PATH): the CUDA kernels need it to build")
    out = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1] if out.strip() else "unknown"


def build_hash() -> str:
    import torch
    h = hashlib.sha256()
    for path in (*sources(), *headers()):
        h.update(str(path.relative_to(IMPLS)).encode())
        h.update(path.read_bytes())
    h.update(repr((FLAGS, arch(), torch.__version__, torch.version.cuda, nvcc_version())).encode())
    return h.hexdigest()[:16]


def _library_file(folder: Path) -> Path:
    return folder / f"{NAME}.so"


def _cuda_home() -> str:
    compiler = nvcc()
    if compiler is None:
        raise BuildError("nvcc was not found (set CUDA_HOME or put nvcc on PATH): the CUDA kernels need it to build")
    return str(Path(compiler).resolve().parent.parent)


def _whole(folder: Path) -> bool:
    """A finished build: its library and the mark written after the link (a library file alone
    may be one the linker is still writing)."""
    return _library_file(folder).exists() and (folder / DONE).exists()


def kept(out: Path | None) -> Path | None:
    """The library already built for this hash (prebuilt, in ``out`` or the cache), or None."""
    key = build_hash()
    for root in filter(None, (os.environ.get(PREBUILT_ENV), out)):
        if _whole(Path(root) / key):
            return _library_file(Path(root) / key)
    folder = _folder(out)
    return _library_file(folder) if _whole(folder) else None


def _folder(out: Path | None) -> Path:
    from harness.measure.roofline import cache_dir
    return Path(out or cache_dir() / "cuda") / build_hash()


@contextlib.contextmanager
def _locked(folder: Path):
    """The build folder to this thread alone (flock: across processes, and across threads that
    each open the lock file); the others wait here."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build(out: Path | None = None, verbose: bool = False) -> Path:
    """The built library's file: found where it was kept, or compiled now into ``out`` (default
    the cache folder), after any build of the same folder running elsewhere. Raises BuildError
    with the compiler's own words on failure (this run's earlier failure, unbuilt again)."""
    found = kept(out)
    if found:
        return found
    folder = _folder(out)
    with _locked(folder):
        if _whole(folder):   # built while this one waited
            return _library_file(folder)
        # Under the lock no build of this folder runs: torch's own lock file here is one a killed
        # build left (a run stopped mid-build exits without its cleanup), and torch would wait
        # for it forever.
        (folder / TORCH_BATON).unlink(missing_ok=True)
        failed = folder / FAILED
        if failed.exists():
            token, _, message = failed.read_text().partition("\n")
            if token and token == os.environ.get(TOKEN_ENV):
                raise BuildError(message)
            failed.unlink()
        try:
            _compile(folder, verbose)
        except BuildError as e:
            failed.write_text(f"{os.environ.get(TOKEN_ENV, '')}\n{e}")
            raise
    return _library_file(folder)


def _compile(folder: Path, verbose: bool) -> None:
    os.environ.setdefault("CUDA_HOME", _cuda_home())
    os.environ["TORCH_CUDA_ARCH_LIST"] = arch()
    from torch.utils import cpp_extension
    started = time.perf_counter()
    try:
        cpp_extension.load(name=NAME, sources=[str(s) for s in sources()], extra_cuda_cflags=FLAGS,
                           extra_cflags=["-O3"], extra_include_paths=[str(HERE)], build_directory=str(folder),
                           is_python_module=False, verbose=verbose)
    except Exception as e:  # noqa: BLE001 - the compiler's message is the useful part
        raise BuildError(f"building the CUDA kernels failed ({type(e).__name__}): {str(e)[-1500:]}") from e
    (folder / DONE).write_text(f"{time.perf_counter() - started:.1f}\n")


_started: threading.Thread | None = None


def start() -> bool:
    """Build in a background thread of this process, unless a kept build exists: True when
    one was started. Its failure is left in the build folder for this run's binds (TOKEN_ENV
    is set here if it was not: the workers this process starts later inherit it)."""
    global _started
    if kept(None):
        return False
    import uuid
    os.environ.setdefault(TOKEN_ENV, uuid.uuid4().hex)

    def run():
        with contextlib.suppress(BuildError):
            build()
    _started = threading.Thread(target=run, name="cuda-build", daemon=True)
    _started.start()
    return True


def started_is_over() -> bool:
    """Whether the build ``start`` began has ended (built or failed); True where none began."""
    return _started is None or not _started.is_alive()


_loaded: Path | None = None


def loaded() -> Path | None:
    """The library file this process loaded, if any."""
    return _loaded


def load():
    """``torch.ops.harness_cuda``, built (or found) and loaded once per process."""
    global _loaded
    import torch
    if _loaded is None:
        if not kept(None):
            from harness.run import progress
            progress.phase("building the CUDA kernels, or waiting for the run's build (once per source hash)")
        path = build()
        try:
            torch.ops.load_library(str(path))
        except OSError as e:
            raise BuildError(f"the built CUDA kernels at {path} do not load: {e}. Delete that folder to rebuild.") from e
        _loaded = path
    return torch.ops.harness_cuda


def main(argv: list[str] | None = None) -> int:
    import argparse
    parser = argparse.ArgumentParser(description="Build the CUDA kernels of impls/*/*.cu (or find the kept build).")
    parser.add_argument("--out", type=Path, help="the folder to build into (default: $HARNESS_CACHE/cuda)")
    parser.add_argument("--verbose", action="store_true", help="show the compiler's commands")
    args = parser.parse_args(argv)
    if not sources():
        print("build: no CUDA sources under impls/")
        return 0
    started = time.perf_counter()
    try:
        path = build(args.out, args.verbose)
    except BuildError as e:
        print(f"build: {e}", file=sys.stderr)
        return 1
    print(f"build: {len(sources())} sources for sm {arch()} in {path.parent} ({time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
