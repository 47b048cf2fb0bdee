"""The main grids the case files declare, so that the report can say which of them have not run.

A verdict matrix with a column only for the grids that have results would hide the grids that
matter most (the paper's, on GPUs): a grid declared in ``cases/`` without results gets a column
that says NOT RUN. Only each file's ``[grid]`` table is read (name, kind, device, models,
description): the report needs no cell list, and a case file being edited elsewhere in the file
cannot break it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class DeclaredGrid:
    """A main grid as its case file declares it."""

    name: str
    path: Path
    device: str
    models: tuple[str, ...]
    description: str


def declared_grids(cases_dir: str | Path | None) -> list[DeclaredGrid]:
    """The main grids (kind "main": neither controls nor CI slices) of ``cases_dir/*.toml``, by name;
    [] when there is no such directory."""
    if cases_dir is None or not Path(cases_dir).is_dir():
        return []
    out = []
    for path in sorted(Path(cases_dir).glob("*.toml")):
        g = tomllib.loads(path.read_text(encoding="utf-8")).get("grid", {})
        if g.get("name") and g.get("kind", "main") == "main":
            out.append(DeclaredGrid(g["name"], path, g.get("device", "auto"), tuple(g.get("models", ())),
                                    g.get("description", "")))
    return sorted(out, key=lambda d: d.name)
