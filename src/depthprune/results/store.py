"""The results store: one JSON file per cell, written atomically, read back with checks.

Layout under a results directory (any number of them can be merged by the reporter, which also
reads result archives, ``<grid>.jsonl.xz``: :mod:`depthprune.results.archive`):

    <results>/<grid>/<cell-id>.json        one finished cell (schema: depthprune.results.schema)
    <results>/<grid>/dense/<model>.json    the dense model's metrics and calibration losses
    <results>/eval-cache/                  evaluation cache, shared by the grids (below)

The evaluation cache's keys hold every input of an evaluation (model weights, removed set,
settings, dtype, code, libraries), so one cache serves every grid: the tiny and controls grids
evaluate a model they share once.

A cell's file appears only when the cell is finished (write-to-temp + rename), so a run
killed at any moment leaves finished cells intact and no partial file; a rerun skips
every cell whose file exists and whose *fingerprint* (the settings that produced it,
including the code and library versions) still matches, and redoes the rest. A result
made on a stand-in model is never taken for a real one (the stand-in flag is part of
the identity, so of the fingerprint).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from depthprune.common.jsonio import write_json_atomic
from depthprune.results.schema import (
    REQUIRED_FIELDS,
    Result,
    ResultError,
    ResultFileError,
    read_dense,
    read_result,
    read_result_file,
    to_json,
)

__all__ = ["STAND_IN_DIR_MARKER", "ResultError", "claim_results_dir", "cell_path", "dense_path", "iter_dense", "iter_results", "load_finished",
           "ResultFileError", "read_result", "write_result"]


def cell_path(results_dir: str | Path, grid: str, cell_id: str) -> Path:
    return Path(results_dir) / grid / f"{cell_id}.json"


def dense_path(results_dir: str | Path, grid: str, model: str) -> Path:
    return Path(results_dir) / grid / "dense" / f"{model}.json"


#: present in ``<results>/<grid>/`` when it holds results made on stand-ins (a rehearsal)
STAND_IN_DIR_MARKER = ".stand-ins"


def claim_results_dir(directory: str | Path, stand_in: bool) -> None:
    """Keep real and stand-in results apart: a grid's results directory holds one kind only.

    A rehearsal marks its directory (:data:`STAND_IN_DIR_MARKER`); a real run refuses a marked
    directory and a rehearsal refuses one that already holds real results, so nothing a rehearsal
    writes sits where a real run resumes or a report reads real results.
    """
    directory = Path(directory)
    marker = directory / STAND_IN_DIR_MARKER
    if not stand_in:
        if marker.is_file():
            raise ResultError(f"{directory} holds stand-in (rehearsal) results; write real results elsewhere")
        return
    if not marker.is_file():
        real = [p for p in directory.glob("*.json") if not p.name.startswith(".")] if directory.is_dir() else []
        if real:
            raise ResultError(f"{directory} already holds {len(real)} results not marked as stand-ins "
                              f"(e.g. {real[0].name}); rehearsal results need a directory of their own")
        directory.mkdir(parents=True, exist_ok=True)
        marker.write_text("results made on rehearsal stand-ins (depthprune.rehearsal): never real results\n")


def write_result(path: str | Path, result: Mapping[str, Any]) -> None:
    missing = [k for k in REQUIRED_FIELDS if k not in result]
    if missing:
        raise ResultError(f"refusing to write an incomplete result to {path}: missing {', '.join(missing)}")
    write_json_atomic(path, to_json(result))


def load_finished(path: Path, expected_fingerprint: str) -> Result | None:
    """The stored result if it is complete and was made with the same settings, else None."""
    if not path.is_file():
        return None
    try:
        data = read_result(path)
    except ResultError:
        return None
    return data if data.get("fingerprint") == expected_fingerprint else None


def iter_results(dirs: Iterable[str | Path], stand_in: bool = False, healed: bool = False) -> Iterator[Result]:
    """Every cell result under ``dirs`` (recursively); a cell found twice keeps the newest.

    Healed results (:mod:`depthprune.healing`: ``identity.heal`` set) are read only with ``healed``, and then
    only they, a cell once per heal: every reader that predates healing sees exactly what it saw before.

    Results made on stand-in models are skipped unless ``stand_in`` (then only they are read). So are
    what is no cell result: dot files, the ``dense/`` and ``eval-cache/`` folders, results without a
    cell (``prune --json``) and JSON files that are no result at all (:func:`depthprune.results.schema.is_result`).
    A file or archive that is broken -- not JSON, truncated, of another schema -- raises
    :class:`depthprune.results.schema.ResultFileError` naming it: skipped, its cells would be missing from the report unsaid.
    """
    from depthprune.results.archive import SUFFIX, read_archive

    newest: dict[tuple[str | None, str | None, str | None], tuple[float, Result]] = {}
    for d in dirs:
        for archive in sorted(Path(d).rglob(f"*{SUFFIX}")):  # archived results lose to live files (stamp 0)
            for kind, _, data in read_archive(archive):
                if kind != "result":
                    continue
                r = Result.of(data)
                if bool(r.identity.stand_in) == stand_in and r.cell is not None and (r.identity.heal is not None) == healed:
                    newest.setdefault((r.identity.grid, r.cell, r.identity.heal), (0.0, r))
        for path in sorted(Path(d).rglob("*.json")):
            if path.parent.name in ("dense", "eval-cache") or path.name.startswith(".") or not path.is_file():
                continue
            data = read_result_file(path)
            if data is None or bool(data.identity.stand_in) != stand_in or data.cell is None:
                continue
            if (data.identity.heal is not None) != healed:
                continue
            key = (data.identity.grid, data.cell, data.identity.heal)
            stamp = path.stat().st_mtime
            if key not in newest or stamp > newest[key][0]:
                newest[key] = (stamp, data)
    for _, data in sorted(newest.values(), key=lambda sd: (sd[1].identity.grid or "", sd[1].cell or "",
                                                            sd[1].identity.heal or "")):
        yield data


def iter_dense(dirs: Iterable[str | Path], stand_in: bool = False, healed: bool = False) -> Iterator[dict[str, Any]]:
    """Every dense-model file under ``dirs``; those made on stand-ins only if ``stand_in`` (as
    :func:`iter_results`: a rehearsal's dense metrics must never stand for a real model's), healed dense models
    (a ``heal`` field: the healing control) only if ``healed``. A file that is not a JSON object raises
    :class:`depthprune.results.schema.ResultFileError` naming it."""
    from depthprune.results.archive import SUFFIX, read_archive

    def wanted(data: Mapping[str, Any]) -> bool:
        return bool(data.get("stand_in", False)) == stand_in and (data.get("heal") is not None) == healed

    for d in dirs:
        for archive in sorted(Path(d).rglob(f"*{SUFFIX}")):
            for kind, _, data in read_archive(archive):
                if kind == "dense" and wanted(data):
                    yield dict(data)  # a dense file's JSON object
        for path in sorted(Path(d).rglob("dense/*.json")):
            data = read_dense(path)
            if wanted(data):
                yield data
