"""Running grid cells through the recipe: one atomic result file per cell, resumable.

A cell is :mod:`depthprune.recipe` with the case file's settings: the :class:`GridRunner`
keeps one :class:`~depthprune.recipe.Session` (a loaded model) at a time, so a model's
cells share the load (whatever their grid, where device, dtype and batch size agree), the
calibration batches, the dense pass and the single-removal prior of each objective, and one memo of every loss any of its searches computed (greedy
at M=9 re-uses greedy at M=7's path); each cell's cost is still counted as if it ran alone.
Searchers that agree share one evaluation through the on-disk evaluation cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from depthprune.common.jsonio import write_json_atomic
from depthprune.common.machine import release_free_memory
from depthprune.data.profiles import get_profile
from depthprune.grid.cases import Cell, Grid
from depthprune.model import MODELS, WeightsUnavailable, is_stand_in, locate, resolve_dtype, weights_file_in
from depthprune.model.weights import fingerprint as weights_fingerprint
from depthprune.objectives import make_objective
from depthprune.recipe import Calibration, Session, identity, make_result, settings
from depthprune.results.schema import Identity, Result, fingerprint
from depthprune.results.store import cell_path, claim_results_dir, dense_path, load_finished, write_result
from depthprune.scoring.score_store import STORE_NAME, store_enabled
from depthprune.search import get_searcher


class CellSkipped(Exception):
    """The cell cannot run here (no weights, no GPU); the message says why."""


class StandInMismatch(RuntimeError):
    """A real grid run found stand-in weights under a real id, or a rehearsal found real ones."""


def cell_device(grid: Grid, preferred: str | None = None) -> str:
    """The device a cell runs on, or CellSkipped if the grid needs a GPU that is absent."""
    if preferred:
        return preferred
    if grid.device == "cuda":
        if not torch.cuda.is_available():
            raise CellSkipped("needs a CUDA GPU (grid device = cuda); none is available here")
        return "cuda"
    if grid.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return grid.device


def check_runnable(grid: Grid, cell: Cell, device: str | None = None) -> str:
    """The cell's weights directory; CellSkipped with every reason the cell cannot run here."""
    reasons, path = [], ""
    try:
        cell_device(grid, device)
    except CellSkipped as err:
        reasons.append(str(err))
    try:
        path = locate(cell.model)
    except WeightsUnavailable as err:
        reasons.append(f"weights unavailable: {err}")
    if reasons:
        raise CellSkipped("; and ".join(reasons))
    return path


def objective_params(grid: Grid, cell: Cell) -> dict[str, Any]:
    """The case file's [objective.*], the cell's variant over it, its calibration seed over both."""
    params = {**grid.objective_params.get(cell.objective, {}), **dict(cell.objective_params)}
    if cell.calibration_seed is not None:
        params["seed"] = cell.calibration_seed
    return params


def expected_settings(grid: Grid, cell: Cell, device: str, weights_dir: str) -> dict[str, Any]:
    """The settings a fresh run of ``cell`` would record, computed without loading the model
    (so a finished cell is recognised before anything is loaded)."""
    spec = MODELS[cell.model]
    profile = get_profile(spec.profile)
    objective = make_objective(cell.objective, profile, **objective_params(grid, cell))
    resolved = get_searcher(cell.search, **grid.search_params(cell)).params()
    obj = objective.params()
    ident = Identity(
        grid=grid.name, model=cell.model, weights=weights_fingerprint(weights_dir, weights_file_in(spec, weights_dir)),
        profile=profile.name, objective=cell.objective, dataset=obj.get("dataset", ""), answer=obj.get("answer"),
        calibration_seed=obj.get("seed", 0), search=cell.search, variant=cell.variant, budget=cell.budget,
        search_seed=cell.seed, stand_in=is_stand_in(weights_dir),
    )
    return settings(ident, obj, resolved, grid.eval_config(profile), grid.batch_size, device,
                    str(resolve_dtype(grid.dtype, device)))


class GridRunner:
    """Runs or resumes cells; keeps one model loaded at a time."""

    def __init__(self, results_dir: str | Path, device: str | None = None, redo: bool = False,
                 stand_in: bool = False) -> None:
        self.results_dir = Path(results_dir)
        self.device = device
        self.redo = redo
        self.stand_in = stand_in  # a rehearsal runner: runs stand-ins only, into a directory of their own
        store_enabled()  # ValueError now, before any model loads, for a DEPTHPRUNE_SCORE_STORE it does not know
        self._session: tuple[tuple[str, str, str, int], Session] | None = None
        self._dense: dict[tuple[str, str], Any] = {}
        self.ran: list[str] = []
        self.resumed: list[str] = []

    def session(self, grid: Grid, model_id: str) -> Session:
        """The loaded model for ``grid``'s cells of ``model_id``: kept for the next cell that opens it on the
        same device, dtype and batch size, whatever its grid (CI's tiny and controls slices share tiny-llama3's)."""
        key = (model_id, cell_device(grid, self.device), grid.dtype, grid.batch_size)
        if self._session is None or self._session[0] != key:
            self.close()
            session = Session.open(model_id, device=key[1], dtype=grid.dtype, batch_size=grid.batch_size)
            session.store_path = self.score_store()
            self._session = (key, session)
        return self._session[1]

    def eval_cache(self) -> Path:
        """One cache for every grid of this results directory (its keys hold all the evaluation's inputs,
        :func:`depthprune.evaluation.evaluate.cache_key`), so an evaluation two grids share runs once."""
        return self.results_dir / "eval-cache"

    def score_store(self) -> Path | None:
        """One score store for every grid of this results directory (:mod:`depthprune.scoring.score_store`; keyed
        by condition, so two grids share only what is the same computation); None when
        ``DEPTHPRUNE_SCORE_STORE=off``."""
        return self.results_dir / STORE_NAME if store_enabled() else None

    def result(self, grid: Grid, cell: Cell) -> Result:
        """The cell's result: the stored one if finished with the same settings, else a new run."""
        weights_dir = check_runnable(grid, cell, self.device)
        if is_stand_in(weights_dir) != self.stand_in:
            raise StandInMismatch(
                f"{cell.id}: {weights_dir} is {'a' if is_stand_in(weights_dir) else 'not a'} rehearsal stand-in, "
                f"but this runner writes {'stand-in' if self.stand_in else 'real'} results "
                + ("(unset HF_HOME / DEPTHPRUNE_MODELS_DIR of the rehearsal, or run bench/test_rehearsal.py)"
                   if not self.stand_in else "(build the stand-ins and point the environment at them)"))
        claim_results_dir(self.results_dir / grid.name, self.stand_in)
        device = cell_device(grid, self.device)
        path = cell_path(self.results_dir, grid.name, cell.id)
        if not self.redo:
            stored = load_finished(path, fingerprint(expected_settings(grid, cell, device, weights_dir)))
            if stored is not None:
                self.resumed.append(cell.id)
                return stored
        result = self.run(grid, cell)
        write_result(path, result)
        self.ran.append(cell.id)
        return Result.of(result)

    def run(self, grid: Grid, cell: Cell) -> dict[str, Any]:
        """Prune (recipe), evaluate, and return the cell's result (not stored)."""
        session = self.session(grid, cell.model)
        calib = session.calibrate(cell.objective, **objective_params(grid, cell))
        eval_config = grid.eval_config(session.profile)
        dense = self.dense(grid, session, calib, eval_config)
        outcome = calib.search(cell.search, cell.budget, seed=cell.seed, params=grid.search_params(cell))
        release_free_memory()  # the search's state caches and gradients are gone: hand their pages back
        evaluation = session.evaluate(outcome.removed, eval_config, cache_dir=self.eval_cache())
        release_free_memory()
        ident = identity(session, calib, cell.search, cell.budget, cell.seed, cell.variant, grid.name)
        result = make_result(session, calib, outcome, ident, evaluation, eval_config, dense, cell.id)
        result["grid_kind"] = grid.kind  # "controls": reported apart from the main tables and verdicts
        result["compare_with"] = grid.compare_with
        return result

    def dense(self, grid: Grid, session: Session, calib: Calibration, eval_config) -> Any:
        """The dense model's evaluation (once per model) and its calibration losses, on disk."""
        key = (grid.name, session.spec.id)
        if key not in self._dense:
            self._dense[key] = session.evaluate((), eval_config, cache_dir=self.eval_cache())
        path = dense_path(self.results_dir, grid.name, session.spec.id)
        write_json_atomic(path, {
            "grid": grid.name, "model": session.spec.id, "weights": session.weights, "stand_in": session.stand_in,
            "n_layers": session.n_layers,
            "metrics": self._dense[key].metrics, "item_outcomes": self._dense[key].items,
            "item_clusters": self._dense[key].clusters, "window_nll": self._dense[key].windows,
            "load_seconds": session.load_seconds,
            "eval_seconds": self._dense[key].seconds, "eval_cached": self._dense[key].cached,
            "objectives": {c.name: {"objective_params": c.objective.params(), "dense_calibration_loss": c.dense_loss,
                                    "prior": c.prior, "dense_seconds": c.dense_seconds,
                                    "prior_seconds": c.prior_seconds, "prior_seconds_here": c.prior_seconds_here}
                           for c in session.calibrations()},
        })
        return self._dense[key]

    def close(self) -> None:
        if self._session is not None:
            self._session[1].close()
            self._session = None
