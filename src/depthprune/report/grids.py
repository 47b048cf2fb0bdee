"""The main grids the case files declare, so that the report can say which of them have not run.

A verdict matrix with a column only for the grids that have results would hide the grids that
matter most (the paper's, on GPUs): a grid declared in ``cases/`` without results gets a column
that says NOT RUN. Only each file's ``[grid]`` table is read (name, kind, device, models,
description), so a case file being edited elsewhere cannot break the matrix. A grid with results is
also checked against its whole cell list (:func:`depthprune.report.grids.missing_cells`, where the file loads), so a grid run
in part -- one model of two -- says so beside its column instead of passing for the whole grid.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from depthprune.results.schema import Result

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


def missing_cells(grid: DeclaredGrid, results: Iterable[Result]) -> dict[str, tuple[int, int]] | None:
    """model -> (cells with results, cells declared) for each model of ``grid`` that lacks some; None where
    the case file does not load (then the report says nothing it cannot check)."""
    from depthprune.grid.cases import load_grid

    try:
        cells = load_grid(grid.path).cells()
    except (OSError, ValueError):
        return None
    have = {r.get("cell") for r in results if r.identity.grid == grid.name}
    out: dict[str, tuple[int, int]] = {}
    for model in sorted({c.model for c in cells}):
        ids = [c.id for c in cells if c.model == model]
        done = sum(i in have for i in ids)
        if done < len(ids):
            out[model] = (done, len(ids))
    return out


def partial_grids(grids: Iterable[DeclaredGrid], results: Sequence[Result]) -> dict[str, dict[str, tuple[int, int]]]:
    """grid -> :func:`depthprune.report.grids.missing_cells`, for each of ``grids`` that misses some of its declared cells."""
    return {d.name: m for d in grids if (m := missing_cells(d, results))}


def partial_lines(partial: Mapping[str, Mapping[str, tuple[int, int]]]) -> list[str]:
    """A line per grid run in part: which models, how many of their cells have results."""
    lines = []
    for grid, missing in partial.items():
        parts = [f"{model} {done} of {total}" for model, (done, total) in missing.items()]
        lines.append(f"- `{grid}` is run in part (cells with results: {', '.join(parts)}): its column rests on "
                     "the cells run, and a model without results is not in its verdicts.")
    return lines
