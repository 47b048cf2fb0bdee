"""A GGUF's dense checkpoint, converted once into the depthprune cache and loaded from there.

transformers reads a GGUF slowly: its metadata is parsed in full (every vocabulary entry, ~1.6 M fields at
Gemma-3's 262k tokens) for the config, again for the weights, and every tensor is dequantised in numpy. At one
thread that is ~25 s for smollm2-135m and ~75 s for gemma3-270m, paid by every process that opens the model
(each test module, grid cell worker and ``depthprune verify``). So the first load converts: the GGUF is read
once as today (its metadata parsed once, :func:`_one_reader_per_file`), dequantised to float32, and
``save_pretrained`` writes the dense checkpoint (safetensors, config, tokenizer) to
``$DEPTHPRUNE_CACHE/converted/<model>/<GGUF sha256[:16]>-<transformers version>/``; every load, the first
included, then reads that directory with the requested dtype. A cast from the same float32 tensors to the
run's dtype is the cast a direct GGUF load makes, so the loaded weights are the same bit for bit
(``tests/real/test_gguf_checkpoint.py``). The result identity's ``weights`` stays the GGUF's fingerprint: the
conversion is a cache of the same weights.

``DEPTHPRUNE_GGUF_CACHE=off`` reads the GGUF directly every time. A half-written conversion is never
used: it is written to a temporary directory beside its place and renamed when complete. Processes that
open a model at once (two xdist workers) convert it once: the others wait on a lock file beside it
(``<place>.lock``; ``fcntl.flock``, where the platform has it) and then read what the first one wrote.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ENV = "DEPTHPRUNE_GGUF_CACHE"
MARKER = "depthprune-conversion.json"
#: the conversion's own format; a change here makes every older conversion a miss
FORMAT = 1


def enabled() -> bool:
    value = os.environ.get(ENV, "on").strip().lower()
    if value not in ("on", "off"):
        raise ValueError(f"{ENV}={value!r}: allowed values are 'on' and 'off'")
    return value == "on"


def converted_dir(model_id: str, gguf_path: Path) -> Path:
    """Where ``gguf_path``'s conversion lives (keyed by the file's sha256 and the transformers version)."""
    import transformers

    from depthprune.model.files import cache_root
    from depthprune.model.weights import file_sha256

    return cache_root() / "converted" / model_id / f"{file_sha256(gguf_path)[:16]}-transformers{transformers.__version__}"


def is_complete(directory: Path) -> bool:
    try:
        return json.loads((directory / MARKER).read_text()).get("format") == FORMAT
    except (OSError, ValueError):
        return False


@contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Held by one process at a time (an advisory ``flock``; without ``fcntl``, e.g. on Windows, not held:
    two processes then both convert, and the rename below keeps one)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def convert(model_id: str, gguf_path: Path, load_gguf) -> Path:  # noqa: ANN001
    """The conversion directory of ``gguf_path``, written first when missing.

    ``load_gguf() -> (model, tokenizer)`` reads the GGUF dequantised to float32 (the caller's loader,
    so the conversion is exactly what a direct load gives)."""
    target = converted_dir(model_id, gguf_path)
    if is_complete(target):
        return target
    with _exclusive(target.parent / f"{target.name}.lock"):
        if is_complete(target):  # another process converted it while this one waited
            return target
        return _write(model_id, gguf_path, load_gguf, target)


@contextmanager
def _one_reader_per_file() -> Iterator[None]:
    """While it runs, every ``gguf.GGUFReader`` of one file is one object. transformers builds a reader for the
    config and tokenizer and another for the weights, and each parses every metadata field in Python: 9.1 s per
    reader for gemma3-270m's 262k-entry vocabulary (AMX machine, 2026-12-05; its conversion 38 -> 31 s). A
    reader is a read-only memmap with the fields parsed from it, which transformers only reads, so sharing it
    changes nothing that is loaded (``tests/real/test_gguf_checkpoint.py`` compares with a direct load)."""
    import gguf

    real = gguf.GGUFReader
    made: dict[tuple[str, str], object] = {}

    def reader(path, mode="r"):  # noqa: ANN001, ANN202
        key = (os.path.realpath(path), mode)
        if key not in made:
            made[key] = real(path, mode)
        return made[key]

    gguf.GGUFReader = reader
    try:
        yield
    finally:
        gguf.GGUFReader = real


def _write(model_id: str, gguf_path: Path, load_gguf, target: Path) -> Path:  # noqa: ANN001
    """Read the GGUF, write its conversion beside ``target`` and rename it into place."""
    import torch
    import transformers

    from depthprune.model.weights import file_sha256

    with _one_reader_per_file():
        model, tokenizer = load_gguf()
    if any(p.dtype != torch.float32 for p in model.parameters()):
        raise RuntimeError(f"{gguf_path}: the conversion must be float32, got {sorted({str(p.dtype) for p in model.parameters()})}")
    if is_complete(target):  # another process (an xdist worker) finished it meanwhile
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():  # a conversion of another format, or one without its marker: moved aside, then removed
        aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
        os.replace(target, aside / "old")
        shutil.rmtree(aside, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        (tmp / MARKER).write_text(json.dumps({
            "format": FORMAT, "model": model_id, "gguf": str(gguf_path), "gguf_sha256": file_sha256(gguf_path),
            "transformers": transformers.__version__, "torch": torch.__version__, "dtype": "float32",
            "written_by": "depthprune.model.gguf.convert (the first load of the GGUF)"}, indent=1) + "\n")
        for path in tmp.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)  # mkdtemp's 0700 would hide a shared cache
        tmp.chmod(0o755)
        try:
            os.rename(tmp, target)
        except OSError:  # another process finished first: its conversion is the same
            if not is_complete(target):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    del model
    return target
