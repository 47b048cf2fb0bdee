"""Result archives: a grid's finished results in one compressed file that a clean clone can re-judge.

    depthprune archive --results results --out archive        # archive/<grid>.jsonl.xz per grid
    depthprune report --results archive --out REPORT.md       # the same report, in seconds

An archive holds, one JSON line each, every cell result of a grid (its per-item outcomes, trace and
prior included) and the grid's dense-model files, sorted by name; the evaluation cache and results
made on stand-ins are left out. xz output carries no timestamp, so the same results give the same
bytes. The reporter reads archives wherever it reads results (:func:`depthprune.results.store.iter_results`),
so REPORT.md is rebuilt from committed archives without rerunning a cell (tests/results/test_archive.py
checks that the committed REPORT.md is what they give).
"""

from __future__ import annotations

import lzma
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from depthprune.common import layout
from depthprune.common.jsonio import write_jsonl
from depthprune.results.schema import ResultFileError, check_result, is_result, parse_json, read_dense, read_json_file

SUFFIX = layout.ARCHIVE_SUFFIX
#: the records an archive holds
KINDS = ("result", "dense")


def _records(grid_dir: Path) -> list[dict[str, Any]]:
    """The grid's real results and dense files as archive records; a broken file raises
    :class:`~depthprune.results.schema.ResultFileError` (an archive must not drop a cell without a word)."""
    out = []
    for path in sorted(grid_dir.glob("*.json")):
        if path.name.startswith("."):
            continue
        data = read_json_file(path)
        if is_result(data) and not check_result(data, path).identity.stand_in:  # other JSON files are no cells
            out.append({"kind": "result", "name": path.name, "data": data})
    for path in sorted((grid_dir / "dense").glob("*.json")):
        data = read_dense(path)
        if not data.get("stand_in", False):
            out.append({"kind": "dense", "name": path.name, "data": data})
    return out


def write_archives(results_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """One archive per grid directory of ``results_dir`` that holds finished real results."""
    written = []
    out = Path(out_dir)
    grid_dirs = sorted(p for p in Path(results_dir).iterdir() if p.is_dir() and p.name != "eval-cache")
    grids = [(grid_dir, _records(grid_dir)) for grid_dir in grid_dirs]  # every file read before any is written
    for grid_dir, records in grids:
        if not any(r["kind"] == "result" for r in records):
            continue
        out.mkdir(parents=True, exist_ok=True)
        target = out / f"{grid_dir.name}{SUFFIX}"
        # xz, preset 9; atomic: a reader never sees half an archive, a failure leaves no temp file
        write_jsonl(target, records, sort_keys=True, atomic=True)
        written.append(target)
    return written


def _archive_text(path: Path) -> str:
    """The whole archive, decompressed: a truncated or corrupt one fails here, naming the file, before
    any of its records is used."""
    try:
        raw = lzma.decompress(path.read_bytes())
    except lzma.LZMAError as err:
        raise ResultFileError(path, f"not a complete xz archive ({err}): a partial copy? restore it, or rewrite "
                              "it with `depthprune archive`") from None
    except OSError as err:
        raise ResultFileError(path, f"cannot be read ({err.strerror or err})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ResultFileError(path, f"not UTF-8 text once decompressed ({err.reason} at byte {err.start})") from None


def _record(text: str, path: Path, n: int) -> tuple[str, str, Mapping[str, Any]]:
    """Line ``n`` of archive ``path`` as (kind, name, data); results checked as
    :func:`depthprune.results.schema.read_result` checks a file (data a :class:`~depthprune.results.schema.Result`), a
    dense file's data its JSON object."""
    record = parse_json(text, path, n)
    if not (isinstance(record, dict) and record.get("kind") in KINDS and isinstance(record.get("name"), str)
            and isinstance(record.get("data"), dict)):
        raise ResultFileError(path, f"not an archive record: expected a JSON object with kind ({' or '.join(KINDS)}), "
                              "name (a string) and data (an object)", n)
    if record["kind"] == "result":
        return record["kind"], record["name"], check_result(record["data"], path, n, record["name"])
    return record["kind"], record["name"], record["data"]


def read_archive(path: str | Path) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(kind, name, data) per record; a truncated archive or a bad line raises
    :class:`~depthprune.results.schema.ResultFileError` naming the file and the line."""
    path = Path(path)
    lines = _archive_text(path).split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline that ends the last record
    for n, line in enumerate(lines, 1):
        yield _record(line, path, n)
