"""Rehearsal of the paper grid: its cells, unmodified, on CPU against stand-ins built by code.

    depthprune rehearsal build --out DIR && eval "$(depthprune rehearsal env --out DIR)"
    pytest bench/test_rehearsal.py --rehearsal DIR                  # the CI slice of cases/rehearsal/ci.toml
    pytest bench/test_rehearsal.py --rehearsal DIR --full-grid      # all 84 cells (hours)
    pytest bench/test_rehearsal.py --rehearsal DIR --case-override cases/rehearsal/full-shape.toml

A cell runs through the grid runner exactly as ``bench/test_grid.py`` runs a paper cell (same
registry ids, dataset ids, lm-eval tasks), writes its result under ``--rehearsal-results`` (never
the real results directory), and passes on invariants (:mod:`depthprune.rehearsal.checks`), never
on references: nothing here reads or writes ``reference/``. ``tox -e rehearsal`` builds and runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from depthprune.grid.runner import CellSkipped

pytestmark = pytest.mark.rehearsal


@pytest.fixture(scope="session")
def rehearsal_manifest(request):
    """The built stand-ins, after checking that this process sees them (env set before it started)."""
    from depthprune.rehearsal import read_manifest

    where = request.config.getoption("--rehearsal")
    if not where:
        pytest.skip("no stand-ins: build them with `depthprune rehearsal build --out DIR`, "
                    "then pass --rehearsal DIR (tox -e rehearsal does both)")
    manifest = read_manifest(where)
    wrong = {k: (os.environ.get(k), v) for k, v in manifest["environment"].items() if os.environ.get(k) != v}
    if wrong:
        pytest.fail("this process does not see the stand-ins (set before pytest starts: "
                    f'eval "$(depthprune rehearsal env --out {where})"): '
                    + "; ".join(f"{k}={got!r}, expected {want!r}" for k, (got, want) in wrong.items()))
    return manifest


@pytest.fixture(scope="session")
def rehearsal_runner(request, rehearsal_manifest):
    from depthprune.grid.runner import GridRunner

    runner = GridRunner(request.config.getoption("--rehearsal-results"), redo=request.config.getoption("--redo"),
                        stand_in=True)
    yield runner
    runner.close()


def test_rehearsal_cell(rehearsal_cell, rehearsal_runner, rehearsal_manifest, tmp_path):
    from depthprune.data.profiles import PAPER
    from depthprune.rehearsal.checks import check_result, check_saved_checkpoint, check_tokenizer

    grid, cell = rehearsal_cell
    try:
        result = rehearsal_runner.result(grid, cell)
    except CellSkipped as reason:
        pytest.fail(f"{cell.id}: a rehearsal cell must run here, but: {reason}")
    if not result.identity.stand_in:
        pytest.fail(f"{cell.id}: ran on a checkpoint without the stand-in marker: {result.identity.weights}")
    data = rehearsal_manifest["data"]
    names = {PAPER.lm_eval_task(t) for t in (*grid.eval_config(PAPER).tasks, "lambada")}
    split = {"arc_easy": "test", "arc_challenge": "test", "lambada_openai": "test"}
    eval_items = {t: data[t]["records"][split.get(t, "validation")] for t in names}
    problems = check_result(result, grid, cell, eval_items)
    if cell.id in rehearsal_runner.ran:  # a fresh run: its session still holds the model
        session = rehearsal_runner.session(grid, cell.model)
        problems += check_tokenizer(session)
        problems += check_saved_checkpoint(session, result, tmp_path / "pruned")
    assert not problems, f"{cell.id}:\n  - " + "\n  - ".join(problems)


def test_rehearsal_results_stay_apart(rehearsal_manifest, request):
    """Nothing a rehearsal wrote is read as a real result, nor kept beside real ones."""
    from depthprune.results.store import iter_results

    where = Path(request.config.getoption("--rehearsal-results"))
    if not where.is_dir():
        pytest.skip("no rehearsal results yet")
    assert not list(iter_results([where])), "a rehearsal result was read as a real one"
    assert all(r.identity.stand_in for r in iter_results([where], stand_in=True))
