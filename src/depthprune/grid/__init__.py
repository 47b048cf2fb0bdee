"""The benchmark grid: case files, the cell runner and its schedule, the stored references' check, the cluster
submission, the time split and the rivals' measuring tool. Results are stored by :mod:`depthprune.results`; a cell
against another precision's reference is checked by :mod:`depthprune.verify.forks`."""

from depthprune.grid.cases import CaseFileError, Cell, Grid, Tolerance, apply_override, load_grid, load_grids

__all__ = ["CaseFileError", "Cell", "Grid", "Tolerance", "apply_override", "load_grid", "load_grids"]
