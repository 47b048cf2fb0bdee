"""Every cell of every grid in cases/: prune, evaluate, compare with reference/.

Cell ids read ``<model>-<objective>-<searcher>-M<budget>``; select with ``-k``.
Cells whose weights or GPU are missing skip with the reason.
"""

from __future__ import annotations

import pytest

from depthprune.grid.reference import compare, format_failure, make_reference, read_reference, write_reference
from depthprune.grid.runner import CellSkipped


def test_cell(grid_cell, grid_runner, request):
    grid, cell = grid_cell
    try:
        result = grid_runner.result(grid, cell)
    except CellSkipped as reason:
        pytest.skip(f"{cell.id}: {reason}")
    ref_dir = request.config.getoption("--reference-dir")
    reference = read_reference(ref_dir, cell.id)
    if request.config.getoption("--update-reference"):
        if reference is not None and reference.get("kind") == "public-source":
            pytest.skip(f"{cell.id}: has a public-source reference; not overwritten by a measurement")
        write_reference(ref_dir, make_reference(result, grid.tolerance, "pytest bench --update-reference"))
        return
    if reference is None:
        pytest.fail(f"{cell.id}: no reference in {ref_dir}; run it with --update-reference and commit the file")
    problems, notes = compare(result, reference)
    for note in notes:
        request.node.user_properties.append(("note", note))
    assert not problems, format_failure(cell.id, problems, notes)
