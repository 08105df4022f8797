"""Where Numba keeps compiled kernels on disk: ``$HARNESS_CACHE/numba/<hash>``.

Numba's own cache notices a change to the file that defines a kernel, not to a device
function it calls from another file (device.py here): a folder per hash of every Numba
source of the project (this package and impls/*/numba.py) and of the versions makes any
such change a fresh cache instead of a stale kernel."""
import hashlib
import os
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]   # impls/


def sources() -> list[Path]:
    return sorted([*Path(__file__).parent.glob("*.py"), *ROOT.glob("*/numba.py")])


def source_hash() -> str:
    h = hashlib.sha256()
    for name in ("numba", "numba-cuda"):
        try:
            h.update(f"{name}={metadata.version(name)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{name}=missing".encode())
    for path in sources():
        h.update(path.relative_to(ROOT).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def path() -> Path:
    root = Path(os.environ.get("HARNESS_CACHE", Path.home() / ".cache" / "kernel-harness"))
    return root / "numba" / source_hash()


def configure() -> Path:
    """Point NUMBA_CACHE_DIR at this source hash's folder (before numba is imported; if it
    already was, its config too), unless the user chose a folder."""
    folder = path()
    if "NUMBA_CACHE_DIR" not in os.environ or os.environ.get("HARNESS_NUMBA_CACHE_SET") == "1":
        os.environ["NUMBA_CACHE_DIR"] = str(folder)
        os.environ["HARNESS_NUMBA_CACHE_SET"] = "1"
        import sys
        for name in ("numba.core.config", "numba.cuda.core.config"):
            config = sys.modules.get(name)
            if config is not None:
                config.CACHE_DIR = str(folder)
    return Path(os.environ["NUMBA_CACHE_DIR"])
