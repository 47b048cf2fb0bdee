"""Every cell of every grid in cases/: prune, evaluate, compare with reference/.

Cell ids read ``<model>-<objective>-<searcher>-M<budget>``; select with ``-k``.
Cells whose weights or GPU are missing skip with the reason. A cell whose reference was made in
another numeric precision or on another kernel class (``dtype = "auto"``: bf16 where bf16 matmuls
run on AMX, else fp32) is checked across them where the reference's run is archived and a band is
measured for the two classes: a numeric fork passes, a change fails (depthprune.verify.forks,
``--against DTYPE`` to choose the reference). Otherwise it skips with the reason; a cell is never
compared with a reference of another dtype by the exact check.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from depthprune.grid.reference import (
    compare,
    format_failure,
    make_reference,
    not_checkable,
    read_reference,
    reference_dtypes,
    reference_path,
    write_reference,
)
from depthprune.grid.runner import CellSkipped, cell_device
from depthprune.model.kernel_identity import same_kernels
from depthprune.model.precision import auto_dtype, dtype_name, resolve_dtype
from depthprune.results.archive import SUFFIX
from depthprune.verify.forks import ENV, across_enabled, archived_run, check_across, settle
from depthprune.verify.replay import REPLAYED, replay


def _run_dtype(grid, runner) -> str:
    try:
        device = cell_device(grid, runner.device)
    except CellSkipped:
        return ""  # the runner says why
    return dtype_name(resolve_dtype(grid.dtype, device))


def _archives(grid, request) -> list[Path]:
    root = Path(request.config.getoption("--archive"))
    return [root / f"{name}{SUFFIX}" for name in dict.fromkeys((grid.name, grid.compare_with)) if name]


def _fork_reference(grid, cell, ref_dir, dtypes, runner, request):
    """``(reference, its archived run, why not)`` for a check across precisions or kernels: the first of
    ``dtypes`` whose measured reference has an archived run and a band against this machine's class."""
    from depthprune.results.provenance import environment
    from depthprune.verify.bands import load_table, loss_band, numeric_class

    here_env = environment(cell_device(grid, runner.device), _run_dtype(grid, runner))
    here = numeric_class(here_env)
    table, why = load_table(), []
    for dtype in dtypes:
        reference = read_reference(ref_dir, cell.id, dtype)
        if reference is None or reference.get("kind") != "measured":
            continue
        run = archived_run(reference, _archives(grid, request))
        same = None if run is None else same_kernels(run["environment"], here_env)
        if run is None:
            why.append(f"its {dtype} reference's run is in no archive of {request.config.getoption('--archive')}")
        elif same:
            why.append(f"its {dtype} reference was made on this machine's kernels (the same fingerprint): "
                       "the exact check applies")
        elif numeric_class(run["environment"]) == here:
            why.append(f"its {dtype} reference was made on this machine's class ({here})"
                       + (", on other kernels (another fingerprint)" if same is False else "")
                       + ": no band is measured within one class; the exact check applies")
        elif loss_band(table, numeric_class(run["environment"]), here, cell.objective, cell.model,
                    float(run["calibration_loss"])) is None:
            why.append(f"no band is measured for {numeric_class(run['environment'])} against {here}")
        else:
            return reference, run, None
    return None, None, "; ".join(why) or "no measured reference"


def test_cell(grid_cell, grid_runner, request):
    grid, cell = grid_cell
    ref_dir = grid.reference_dir(request.config.getoption("--reference-dir"))
    update = request.config.getoption("--update-reference")
    dtype = _run_dtype(grid, grid_runner)
    against = request.config.getoption("--against")
    against = None if against == dtype else against  # its own dtype: the usual checks
    reference = read_reference(ref_dir, cell.id, dtype) if dtype and not against else None
    fork_run = None
    if dtype and not update and (reference is None or reference.get("kind") == "measured"):
        # another precision, or the same on other kernels: a numeric fork or a change, where the reference's
        # run is archived and a band is measured for the two classes (depthprune.verify.forks); a reference
        # of this run's own dtype comes first, checked across kernels only where its run is archived
        # DEPTHPRUNE_ACROSS=off (CI) leaves a cell with only another precision's references skipping
        others = ([against] if against else [dtype] if reference is not None
                  else reference_dtypes(ref_dir, cell.id) if across_enabled() else [])
        fork_reference, fork_run, why = _fork_reference(grid, cell, ref_dir, others, grid_runner, request)
        if fork_run is not None:
            reference = fork_reference
        elif against or reference is None and reference_dtypes(ref_dir, cell.id):
            why = why if others else f"{ENV}=off"
            others = [against] if against else reference_dtypes(ref_dir, cell.id)
            reason = (auto_dtype(cell_device(grid, grid_runner.device))[1] if grid.dtype == "auto"
                      else f"dtype = {grid.dtype}")
            pytest.skip(f"{cell.id}: its references were made in {', '.join(others)}; here it runs in {dtype} "
                        f"({reason}), and it is not checked across precisions here ({why}). "
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
    if fork_run is not None:
        from depthprune.verify.bands import load_table
        from depthprune.verify.remeasure import second_opinion

        table = load_table()
        check = check_across(result, fork_run, table)
        # shared sets outside their bands: checked again in the recorded precision here, as verify does
        finding = settle(check, cell.id, second_opinion(fork_run, table, dtype) if check.failed_sets else None)
        if check.not_checkable and not check.problems:
            pytest.skip(f"{cell.id}: removed {sorted(result['removed'])}, the {fork_reference['dtype']} reference "
                        f"{sorted(fork_run['removed'])}, every shared set within its band; not checkable across "
                        f"precisions: {check.not_checkable}")
        notes = [f"checked across {check.recorded_class} (reference) and {check.here_class} (here): "
                 f"{check.sets_compared} shared sets compared with their bands", *check.notes]
        for note in notes:
            request.node.user_properties.append(("note", note))
        if finding is not None:  # the band rule's reported failure, and nothing else (depthprune.verify.findings)
            pytest.xfail(f"{cell.id} fails rule {finding.rule} on {list(finding.sets)} as found: {finding.what}")
        assert not check.problems, format_failure(cell.id, check.problems, notes)
        return
    if reference is None:
        pytest.fail(f"{cell.id}: no reference in {ref_dir}; run it with --update-reference and commit the file")
    problems, notes = compare(result, reference)
    unknown = not_checkable(result, reference) if problems else None
    if unknown:  # bo's GP fits on other kernels: another set is no evidence either way
        pytest.skip(f"{cell.id}: not checkable here: {unknown}")
    for note in notes:
        request.node.user_properties.append(("note", note))
    assert not problems, format_failure(cell.id, problems, notes)
