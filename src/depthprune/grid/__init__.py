"""The benchmark grid: case files, cell runner, results store and references."""

from depthprune.grid.cases import CaseFileError, Cell, Grid, Tolerance, apply_override, load_grid, load_grids

__all__ = ["CaseFileError", "Cell", "Grid", "Tolerance", "apply_override", "load_grid", "load_grids"]
