"""Fingerprints of model weights: which checkpoint a result was computed from.

One registry id can stand for different weights (a Hub checkpoint vs a local copy, a
quantised file vs the original, a re-trained tiny model, a rehearsal stand-in), so
results and caches are keyed by a hash of the weight files actually loaded, not by the
id. Hashing 16 GB of weights takes a minute, so:

* in a Hugging Face cache snapshot a weight file is a link to a blob named by its own
  sha256 (Git LFS's object id), which is used as the file's hash without reading it;
* other files are hashed once and remembered by (real path, size, mtime) in
  ``$DEPTHPRUNE_CACHE/weights.json`` (default ``~/.cache/depthprune``).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from depthprune.common.jsonio import JSONFileError, read_json, write_json_atomic

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _cache_file() -> Path:
    return Path(os.environ.get("DEPTHPRUNE_CACHE", Path.home() / ".cache" / "depthprune")) / "weights.json"


def file_sha256(path: Path) -> str:
    """sha256 of one weight file: the HF blob name when it is one, else its content (memoised)."""
    real = path.resolve()
    if path.is_symlink() and real.parent.name == "blobs" and _SHA256.match(real.name):
        return real.name
    stat = real.stat()
    key = f"{real}|{stat.st_size}|{stat.st_mtime_ns}"
    cache_path = _cache_file()
    try:
        cache = read_json(cache_path)
    except (OSError, JSONFileError):
        cache = {}
    if key in cache:
        return cache[key]
    digest = hashlib.sha256()
    with open(real, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 24), b""):
            digest.update(chunk)
    cache[key] = digest.hexdigest()
    try:
        write_json_atomic(cache_path, cache)
    except OSError:
        pass  # a read-only home only costs a re-hash next time
    return cache[key]


def weight_files(directory: str | Path, only: str | None = None) -> list[Path]:
    """The weight files of a checkpoint directory (``only``: one named file, e.g. a GGUF)."""
    root = Path(directory)
    if only is not None:
        return [root / only]
    return sorted(p for p in root.iterdir() if p.suffix in WEIGHT_SUFFIXES and p.is_file())


def fingerprint(directory: str | Path, only: str | None = None) -> str:
    """``sha256:<16 hex>`` over (file name, file sha256) of every weight file."""
    files = weight_files(directory, only)
    if not files:
        raise FileNotFoundError(f"no weight files ({', '.join(WEIGHT_SUFFIXES)}) in {directory}")
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.name}\0{file_sha256(path)}\n".encode())
    return "sha256:" + digest.hexdigest()[:16]
