"""The environment a result was produced in, fingerprints of the code.

Every result records package versions, device, dtype and the git revision, so a
number in REPORT.md can be traced to what produced it. Whether a stored result may be
*reused* is decided by fingerprints instead: :func:`code_fingerprint` hashes the modules
that can change a result (not the git revision, which would invalidate every result at
every commit, including commits that only touch the report or the docs), and
:func:`library_versions` the libraries that compute one.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
from collections.abc import Callable
from functools import lru_cache, wraps
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

# moved to depthprune.jsonio; importable from here as before
from depthprune.jsonio import write_json_atomic as write_json_atomic

PACKAGES = ("depthprune", "torch", "transformers", "datasets", "tokenizers", "lm_eval", "botorch", "scipy", "numpy")
#: Libraries whose version can change a result (depthprune itself is covered by code_fingerprint).
RESULT_LIBRARIES = tuple(p for p in PACKAGES if p != "depthprune") + ("gpytorch", "gguf")

_PACKAGE_ROOT = Path(__file__).resolve().parent
#: Parts of the package that cannot change a result: presentation (report, CLI), the
#: harness around a cell (references; case-file parsing: case settings enter the cell
#: fingerprint themselves; the cluster submission; the planner; the GPU throughput check), the tiny family's build,
#: the data builders (their outputs, the shipped weights, fixtures and frozen data, are fingerprinted as data), the
#: real models' cards and experiments (they call the core, never the other way), and the rehearsal's stand-in
#: builder and checks (stand-in weights are fingerprinted by weights.py).
_NOT_RESULT_AFFECTING = ("report/", "cli/", "grid/reference.py", "grid/cases.py", "grid/cluster.py", "plan/",
                         "builders/", "cards/", "experiments/", "tiny/", "rehearsal/")


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """Installed version of each package (``absent`` where it is not installed)."""
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name.replace("_", "-"))
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def library_versions() -> dict[str, str]:
    """Versions of the libraries that compute results (part of every result fingerprint)."""
    return package_versions(RESULT_LIBRARIES)


def _result_affecting_files() -> list[Path]:
    files = []
    for path in sorted(_PACKAGE_ROOT.rglob("*")):
        rel = path.relative_to(_PACKAGE_ROOT).as_posix()
        if not path.is_file() or "__pycache__" in rel or rel.startswith(_NOT_RESULT_AFFECTING):
            continue
        if path.suffix == ".py" or (rel.startswith(("assets/tiny/", "assets/real/")) and "/models/" not in rel):
            files.append(path)  # code, plus the shipped fixtures, tasks and tokenizer (weights: weights.py)
    return files


_F = TypeVar("_F", bound=Callable[..., Any])


def keeps_torch_threads(fn: _F) -> _F:
    """``fn`` may set torch's thread count for its own work; its caller gets its count back. A build stage
    run in a test process (tiny's train and check) otherwise left the process at its count."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import torch

        before = torch.get_num_threads()
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_num_threads(before)

    return wrapper  # type: ignore[return-value]


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 (16 hex) of the result-affecting modules and shipped data, by content."""
    digest = hashlib.sha256()
    for path in _result_affecting_files():
        digest.update(path.relative_to(_PACKAGE_ROOT).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


def git_revision(path: Path | None = None) -> str:
    """Commit of the checkout the package runs from (``+dirty`` if its tracked files under ``path``, the
    package by default, are modified), or ``unknown``. Only that tree: a grid run writes its own references,
    results and REPORT.md into the checkout, and must not call the code it runs modified."""
    where = path or Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=10)
        if rev.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "."], cwd=where,
                               capture_output=True, text=True, timeout=10)
        return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def environment(device: str = "cpu", dtype: str = "float32") -> dict[str, Any]:
    import torch

    from depthprune.kernel_identity import kernel_record

    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
        "device": device,
        "dtype": dtype,
        "torch_threads": torch.get_num_threads(),
        "git_revision": git_revision(),
        "kernels": kernel_record(device),  # which matmul kernels ran (AMX or not): depthprune.precision
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return info


def device_memory(device: Any) -> int:
    """The bytes a ``torch.device`` offers a budget: free memory on CUDA, physical memory on a CPU (8 GiB
    where the OS does not say). The scorer's prefix cache and cbo's gradient passes each take a share."""
    if device.type == "cuda":
        import torch

        return int(torch.cuda.mem_get_info(device)[0])
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def local_workers() -> int:
    """How many processes of this run share the machine's memory: pytest-xdist's workers
    (``PYTEST_XDIST_WORKER_COUNT``, set in each), else 1. CPU memory budgets are split among them."""
    try:
        return max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    except ValueError:
        return 1


def release_free_memory() -> bool:
    """Hand the allocator's free pages back to the OS (glibc's ``malloc_trim(0)``, which also returns
    free pages inside the heap); False where there is no glibc. Under the CPU environments'
    ``GLIBC_TUNABLES`` (tox.ini) freed blocks stay in the heap, which spares a cell's chunks their page
    faults, but makes a process's RSS its high-water mark: memory a finished search or evaluation no
    longer uses that the other worker on the machine may need (in the gemma3 run at 4037b34 a worker held
    14.8 GB and the kernel swapped 4.9 GB of its neighbour; how much of it was free blocks was not measured). The grid runner calls it between a cell's phases."""
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return bool(trim(0))


def switch(name: str) -> bool:
    """An on/off switch read from the environment variable ``name`` (unset: on). ``off``, ``0``, ``false``,
    ``no`` turn it off; ``on``, ``1``, ``true``, ``yes`` and empty keep it on; anything else raises, so that a
    typo stops a run before it loads anything instead of being read as either."""
    value = os.environ.get(name, "on").strip().lower()
    if value in ("off", "0", "false", "no"):
        return False
    if value in ("on", "1", "true", "yes", ""):
        return True
    raise ValueError(f"{name}={os.environ[name]!r}: allowed values are 'on' and 'off'")
