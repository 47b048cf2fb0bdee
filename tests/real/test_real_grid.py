"""The real grid (cases/real.toml) and its CI slice (cases/real-ci.toml): their cells, the slice's
settings against the grid's, the real profile's defaults against the grid's calibration (so
``depthprune prune --model smollm2-135m`` calibrates as a cell does), and how a slice is kept out
of references and reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from depthprune.data.profiles import get_profile
from depthprune.grid.cases import CaseFileError, load_grid, load_grids
from depthprune.objectives import make_objective

ROOT = Path(__file__).resolve().parents[2]
GRIDS = {g.name: g for g in load_grids(ROOT / "cases")}
REAL, SLICE = GRIDS["real"], GRIDS["real-ci"]


def test_the_real_grid_has_its_cells_and_runs_none_in_ci():
    ids = [c.id for c in REAL.cells()]
    assert len(ids) == len(set(ids)) == 56 + 28
    budgets = {(c.model, c.budget) for c in REAL.cells() if c.search != "rank"}
    assert budgets == {("smollm2-135m", 7), ("smollm2-135m", 9), ("gemma3-270m", 4), ("gemma3-270m", 5)}
    assert {c.search for c in REAL.cells()} == {"oneshot", "greedy", "beam", "ga", "bo", "cbo", "fbs", "rank"}
    assert REAL.ci_cells == ()  # an explicit empty slice: CI runs cases/real-ci.toml instead


def test_the_slice_repeats_oneshot_cells_at_the_grids_calibration_with_fewer_items():
    assert SLICE.kind == "slice" and SLICE.compare_with == "real" and SLICE.ci_cells is None
    real_ids = {c.id for c in REAL.cells()}
    assert {c.id for c in SLICE.cells()} <= real_ids
    assert {(c.model, c.objective, c.search, c.budget) for c in SLICE.cells()} == {
        ("smollm2-135m", "ppl", "oneshot", 7), ("gemma3-270m", "margin", "oneshot", 4)}  # both models, both objectives
    assert SLICE.objective_params == REAL.objective_params
    same = {k: v for k, v in REAL.evaluation.items() if k not in ("limit", "c4_windows")}
    assert {k: SLICE.evaluation[k] for k in same} == same
    assert SLICE.evaluation["limit"] < REAL.evaluation["limit"]
    assert SLICE.reference_dir("reference") == Path("reference") / "real-ci"
    assert REAL.reference_dir("reference") == Path("reference")


@pytest.mark.parametrize("objective", ["ppl", "margin"])
def test_the_real_profile_calibrates_as_the_grid(objective):
    real = get_profile("real")
    assert (make_objective(objective, real, **REAL.objective_params[objective]).params()
            == make_objective(objective, real).params())


def test_a_slice_needs_the_grid_it_slices(tmp_path):
    text = (ROOT / "cases" / "real-ci.toml").read_text().replace('compare_with = "real"\n', "")
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(CaseFileError, match=r"compare_with.*slices"):
        load_grid(path)
