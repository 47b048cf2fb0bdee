"""Every cell of every grid in cases/: prune, evaluate, compare with reference/.

Cell ids read ``<model>-<objective>-<searcher>-M<budget>``; select with ``-k``.
Cells whose weights or GPU are missing skip with the reason, and so do cells whose
references were all made in another numeric precision than this machine runs them in
(``dtype = "auto"``: bf16 where bf16 matmuls run on AMX, else fp32): a cell is never
compared with a reference of another dtype.
"""

from __future__ import annotations

import pytest

from depthprune.grid.reference import (
    compare,
    dtype_name,
    format_failure,
    make_reference,
    read_reference,
    reference_dtypes,
    reference_path,
    write_reference,
)
from depthprune.grid.runner import CellSkipped, cell_device
from depthprune.precision import auto_dtype, resolve_dtype
from depthprune.verify.replay import REPLAYED, replay


def _run_dtype(grid, runner) -> str:
    try:
        device = cell_device(grid, runner.device)
    except CellSkipped:
        return ""  # the runner says why
    return dtype_name(resolve_dtype(grid.dtype, device))


def test_cell(grid_cell, grid_runner, request):
    grid, cell = grid_cell
    ref_dir = grid.reference_dir(request.config.getoption("--reference-dir"))
    update = request.config.getoption("--update-reference")
    dtype = _run_dtype(grid, grid_runner)
    reference = read_reference(ref_dir, cell.id, dtype) if dtype else None
    if reference is None and dtype and not update:
        others = reference_dtypes(ref_dir, cell.id)
        if others:
            why = auto_dtype(cell_device(grid, grid_runner.device))[1] if grid.dtype == "auto" else f"dtype = {grid.dtype}"
            pytest.skip(f"{cell.id}: its references were made in {', '.join(others)}; here it runs in {dtype} "
                        f"({why}), and results of different precisions are never compared. "
                        f"Run it where auto chooses {others[0]}, or write {reference_path(ref_dir, cell.id, dtype)} "
                        "with --update-reference")
    try:
        result = grid_runner.result(grid, cell)
    except CellSkipped as reason:
        pytest.skip(f"{cell.id}: {reason}")
    # the result replays with no model: its searcher, on its recorded trace, asks for the same sets and
    # returns the same answer (depthprune verify --replay-only; cbo and bo record what they read and fit)
    replayed = replay(result)
    assert replayed.status == REPLAYED, f"{cell.id}: replay {replayed.status}: {replayed.disagreement or replayed.not_replayed}"
    if update:
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
