"""Result archives: a grid's finished results in one compressed file that a clean clone can re-judge.

    depthprune archive --results results --out archive        # archive/<grid>.jsonl.xz per grid
    depthprune report --results archive --out REPORT.md       # the same report, in seconds

An archive holds, one JSON line each, every cell result of a grid (its per-item outcomes, trace and
prior included) and the grid's dense-model files, sorted by name; the evaluation cache and results
made on stand-ins are left out. xz output carries no timestamp, so the same results give the same
bytes. The reporter reads archives wherever it reads results (:func:`depthprune.grid.results.iter_results`),
so REPORT.md is rebuilt from committed archives without rerunning a cell (tests/test_archive.py
checks that the committed REPORT.md is what they give).
"""

from __future__ import annotations

import json
import lzma
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from depthprune.result import ResultError, read_result, validate

SUFFIX = ".jsonl.xz"


def _records(grid_dir: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(grid_dir.glob("*.json")):
        if path.name.startswith("."):
            continue
        try:
            data = read_result(path)
        except ResultError:
            continue  # not a finished cell (the reporter skips it too)
        if not data["stand_in"]:
            out.append({"kind": "result", "name": path.name, "data": json.loads(path.read_text())})
    for path in sorted((grid_dir / "dense").glob("*.json")):
        data = json.loads(path.read_text())
        if not data.get("stand_in", False):
            out.append({"kind": "dense", "name": path.name, "data": data})
    return out


def write_archives(results_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """One archive per grid directory of ``results_dir`` that holds finished real results."""
    import os
    import tempfile

    written = []
    out = Path(out_dir)
    for grid_dir in sorted(p for p in Path(results_dir).iterdir() if p.is_dir()):
        records = _records(grid_dir)
        if not any(r["kind"] == "result" for r in records):
            continue
        out.mkdir(parents=True, exist_ok=True)
        target = out / f"{grid_dir.name}{SUFFIX}"
        text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records).encode()
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=out)
        try:  # as env.write_json_atomic: a reader never sees half an archive, a failure leaves no temp file
            with os.fdopen(fd, "wb") as fh:
                fh.write(lzma.compress(text, preset=9))
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        written.append(target)
    return written


def read_archive(path: str | Path) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(kind, name, data) per record; results validated as :func:`depthprune.result.read_result` does."""
    with lzma.open(path, "rt") as fh:
        for n, line in enumerate(fh, 1):
            record = json.loads(line)
            data = record["data"]
            if record["kind"] == "result":
                data = validate(data, f"{path}:{n} ({record['name']})")
            yield record["kind"], record["name"], data
