"""Results made on rehearsal stand-ins never pass for real ones: not in the readers, not as
references, not in a real results directory, not through a pruned copy of a stand-in."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from depthprune.grid.cases import Cell, load_grid
from depthprune.grid.reference import compare, make_reference
from depthprune.model import STAND_IN_MARKER
from depthprune.results.schema import Result
from depthprune.results.store import (
    STAND_IN_DIR_MARKER,
    ResultError,
    claim_results_dir,
    iter_dense,
    iter_results,
    write_result,
)
from tests.fixtures import result_v2

ROOT = Path(__file__).resolve().parents[2]


def _stand_in(result: Result) -> Result:
    return result.replace(identity=dataclasses.replace(result.identity, stand_in=True))


def test_results_directories_hold_one_kind(tmp_path):
    real_dir, rehearsal_dir = tmp_path / "real" / "paper", tmp_path / "rehearsal" / "paper"
    write_result(real_dir / "a.json", result_v2("llama3-8b", "ppl", "oneshot", [1, 2, 3], 1.0))
    with pytest.raises(ResultError, match="not marked as stand-ins"):
        claim_results_dir(real_dir, stand_in=True)
    claim_results_dir(real_dir, stand_in=False)
    claim_results_dir(rehearsal_dir, stand_in=True)
    assert (rehearsal_dir / STAND_IN_DIR_MARKER).is_file()
    with pytest.raises(ResultError, match="holds stand-in"):
        claim_results_dir(rehearsal_dir, stand_in=False)


def test_readers_and_references_never_take_a_stand_in_for_real(tmp_path):
    real = result_v2("llama3-8b", "ppl", "oneshot", [1, 2, 3], 1.0, grid="paper")
    fake = _stand_in(result_v2("llama3-8b", "ppl", "greedy", [1, 2, 4], 2.0, grid="paper"))
    write_result(tmp_path / "paper" / "real.json", real)
    write_result(tmp_path / "paper" / "fake.json", fake)
    for stand_in in (False, True):
        (tmp_path / "paper" / "dense").mkdir(exist_ok=True)
        (tmp_path / "paper" / "dense" / f"{stand_in}.json").write_text(
            json.dumps({"grid": "paper", "model": "llama3-8b", "stand_in": stand_in, "metrics": {}}))
    assert [r.identity.search for r in iter_results([tmp_path])] == ["oneshot"]
    assert [r.identity.search for r in iter_results([tmp_path], stand_in=True)] == ["greedy"]
    assert [d["stand_in"] for d in iter_dense([tmp_path])] == [False]
    assert [d["stand_in"] for d in iter_dense([tmp_path], stand_in=True)] == [True]
    from depthprune.grid.cases import Tolerance

    with pytest.raises(ValueError, match="stand-in"):
        make_reference(fake, Tolerance(), "test")
    reference = make_reference(real, Tolerance(), "test")
    problems, _ = compare(fake.replace(removed=real["removed"], calibration_loss=1.0), reference)
    assert problems and "stand-in" in problems[0]


def test_grid_runner_refuses_to_mix_stand_ins_and_real_results(tmp_path, monkeypatch):
    from depthprune.grid import runner as runner_mod

    stand_in_dir = tmp_path / "weights"
    stand_in_dir.mkdir()
    (stand_in_dir / STAND_IN_MARKER).write_text("{}")
    monkeypatch.setattr(runner_mod, "check_runnable", lambda grid, cell, device=None: str(stand_in_dir))
    grid = load_grid(ROOT / "cases" / "paper.toml")
    cell = Cell("paper", "llama3-8b", "ppl", "oneshot", 7)
    with pytest.raises(runner_mod.StandInMismatch, match="is a rehearsal stand-in"):
        runner_mod.GridRunner(tmp_path / "results").result(grid, cell)
    (stand_in_dir / STAND_IN_MARKER).unlink()
    with pytest.raises(runner_mod.StandInMismatch, match="is not a rehearsal stand-in"):
        runner_mod.GridRunner(tmp_path / "results", stand_in=True).result(grid, cell)


def test_a_pruned_stand_in_is_still_a_stand_in(tmp_path, llama_dir):
    """save_pruned of a stand-in session writes the marker, so the pruned copy never loads as real."""
    from depthprune.model import is_stand_in
    from depthprune.recipe import Session, save_pruned

    model_dir = tmp_path / "stand-in"
    shutil.copytree(llama_dir, model_dir)
    (model_dir / STAND_IN_MARKER).write_text("{}")
    session = Session.open(str(model_dir), profile="tiny", device="cpu", dtype="float32")
    assert session.stand_in
    out = save_pruned(session, {"removed": [1, 2], "cell": None}, tmp_path / "pruned")
    assert is_stand_in(out)
    assert json.loads((out / STAND_IN_MARKER).read_text())["removed"] == [1, 2]
