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
import platform
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("depthprune", "torch", "transformers", "datasets", "tokenizers", "lm_eval", "botorch", "scipy", "numpy")
#: Libraries whose version can change a result (depthprune itself is covered by code_fingerprint).
RESULT_LIBRARIES = tuple(p for p in PACKAGES if p != "depthprune") + ("gpytorch", "gguf")

_PACKAGE_ROOT = Path(__file__).resolve().parent.parent
#: The parts of the package that can change a result, by content: the rooms that compute one (the model, its data
#: and evaluation protocol, the objectives, the searchers, the scoring engine, the evaluation), the one pipeline that
#: runs them (recipe.py, and the grid runner's cell settings), the speed cells (their results are timings), the
#: small tools they share (parameter checks, JSON writing) and the schema a result is written in. An allowlist: a
#: new room changes no result until it is named here, and moving a module between rooms changes the fingerprint once
#: (its path is hashed with its content). Presentation, verification, planning, the builders and the harness around a
#: cell (cases, references, cluster, rivals) are outside; the shipped fixtures, tasks and tokenizer are in (the
#: weights are fingerprinted by :mod:`depthprune.model.weights`).
RESULT_AFFECTING = ("__init__.py", "recipe.py", "model/", "data/", "objectives/", "search/", "scoring/", "evaluation/",
                    "healing/", "speed/", "common/", "results/schema.py", "grid/runner.py", "assets/tiny/", "assets/real/")


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
        if not path.is_file() or "__pycache__" in rel or not rel.startswith(RESULT_AFFECTING):
            continue
        if path.suffix == ".py" or (rel.startswith(("assets/tiny/", "assets/real/")) and "/models/" not in rel):
            files.append(path)  # code, plus the shipped fixtures, tasks and tokenizer (weights: model/weights.py)
    return files


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
    where = path or _PACKAGE_ROOT
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

    from depthprune.model.kernel_identity import kernel_record

    info: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
        "device": device,
        "dtype": dtype,
        "torch_threads": torch.get_num_threads(),
        "git_revision": git_revision(),
        "kernels": kernel_record(device),  # which matmul kernels ran (AMX or not): depthprune.model.precision
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(torch.device(device))
    return info
