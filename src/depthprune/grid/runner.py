"""Running grid cells: shared work once per model, one atomic result file per cell.

:class:`GridRunner` keeps one :class:`ModelSession` (the loaded model) at a time; a
session builds, once per objective, the calibration batches, the dense scorer and the
single-removal *prior* that every searcher shares (DESIGN.md), and evaluates the dense
model once. Each cell then searches on a fork of the dense scorer (its own memo and
counters, the shared dense states and prior) and evaluates its removed set through the
on-disk evaluation cache, so searchers that agree are evaluated once.
"""

from __future__ import annotations

import gc
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from depthprune.env import environment, write_json_atomic
from depthprune.evaluate import EvalResult, evaluate
from depthprune.grid.cases import Cell, Grid
from depthprune.grid.results import SCHEMA, cell_path, dense_path, fingerprint, load_finished, write_result
from depthprune.models import MODELS, WeightsUnavailable, load_model, locate
from depthprune.objectives import make_objective
from depthprune.scoring import Scorer
from depthprune.search import get_searcher


class CellSkipped(Exception):
    """The cell cannot run here (no weights, no GPU); the message says why."""


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


def check_runnable(grid: Grid, cell: Cell, device: str | None = None) -> None:
    """Raise CellSkipped with every reason the cell cannot run on this machine."""
    reasons = []
    try:
        cell_device(grid, device)
    except CellSkipped as err:
        reasons.append(str(err))
    try:
        locate(cell.model)
    except WeightsUnavailable as err:
        reasons.append(f"weights unavailable: {err}")
    if reasons:
        raise CellSkipped("; and ".join(reasons))


def cell_settings(grid: Grid, cell: Cell, device: str) -> dict[str, Any]:
    """Everything that determines a cell's result (its fingerprint)."""
    spec = MODELS[cell.model]
    return {
        "schema": SCHEMA, "cell": cell.id, "model_source": spec.source,
        "objective_params": grid.objective_params.get(cell.objective, {}),
        "searcher_params": grid.searcher_params.get(cell.search, {}),
        "evaluation": asdict(grid.eval_config(spec.profile)), "batch_size": grid.batch_size,
        "device": device.split(":")[0], "dtype": grid.dtype, "seed": cell.seed,
    }


class ModelSession:
    """A loaded model and the work its cells share."""

    def __init__(self, grid: Grid, model_id: str, device: str, results_dir: Path) -> None:
        self.grid, self.model_id, self.device, self.results_dir = grid, model_id, device, results_dir
        self.spec = MODELS[model_id]
        start = time.perf_counter()
        self.model, self.tokenizer = load_model(model_id, device=device, dtype=grid.dtype)
        self.load_seconds = time.perf_counter() - start
        self.n_layers = self.model.config.num_hidden_layers
        self._scorers: dict[str, tuple[Scorer, list[float], dict[str, Any]]] = {}
        self._dense: EvalResult | None = None

    @property
    def eval_cache(self) -> Path:
        return self.results_dir / self.grid.name / "eval-cache"

    def objective_state(self, objective_name: str) -> tuple[Scorer, list[float], dict[str, Any]]:
        """(dense scorer, prior, info) for an objective, built on first use."""
        if objective_name not in self._scorers:
            start = time.perf_counter()
            objective = make_objective(objective_name, self.spec.profile,
                                       **self.grid.objective_params.get(objective_name, {}))
            batches = objective.prepare(self.tokenizer, self.spec.profile, self.grid.batch_size)
            scorer = Scorer(self.model, batches, objective)
            prior = [scorer(frozenset([i])) for i in range(self.n_layers)]
            info = {
                "objective_params": objective.params(),
                "calibration_protocol": objective.protocol(),
                "dense_calibration_loss": scorer.dense_loss,
                "prior": prior,
                "prior_cost": {"evaluations": self.n_layers, **scorer.stats.to_dict(),
                               "seconds_total": time.perf_counter() - start},
            }
            self._scorers[objective_name] = (scorer, prior, info)
            self._write_dense()
        return self._scorers[objective_name]

    def dense(self) -> EvalResult:
        if self._dense is None:
            self._dense = evaluate(self.model, self.tokenizer, self.model_id, [], self.spec.profile,
                                   self.grid.eval_config(self.spec.profile), cache_dir=self.eval_cache)
            self._write_dense()
        return self._dense

    def _write_dense(self) -> None:
        data = {
            "grid": self.grid.name, "model": self.model_id, "n_layers": self.n_layers,
            "metrics": self._dense.metrics if self._dense else None,
            "objectives": {name: {k: v for k, v in info.items()} for name, (_, _, info) in self._scorers.items()},
            "load_seconds": self.load_seconds,
        }
        write_json_atomic(dense_path(self.results_dir, self.grid.name, self.model_id), data)

    def run(self, cell: Cell) -> dict[str, Any]:
        base, prior, info = self.objective_state(cell.objective)
        dense = self.dense()
        scorer = base.fork(known={frozenset([i]): loss for i, loss in enumerate(prior)})
        params = self.grid.searcher_params.get(cell.search, {})
        searcher = get_searcher(cell.search, **params)
        result = searcher.search(n_layers=self.n_layers, budget=cell.budget, score=scorer, seed=cell.seed,
                                 prior=prior)
        evaluation = evaluate(self.model, self.tokenizer, self.model_id, result.removed, self.spec.profile,
                              self.grid.eval_config(self.spec.profile), cache_dir=self.eval_cache)
        settings = cell_settings(self.grid, cell, self.device)
        return {
            "schema": SCHEMA,
            "cell": cell.id, "grid": self.grid.name, "model": cell.model, "model_source": self.spec.source,
            "n_layers": self.n_layers, "objective": cell.objective, "search": cell.search,
            "budget": cell.budget, "seed": cell.seed,
            "removed": list(result.removed),
            "calibration_loss": result.loss,
            "dense_calibration_loss": info["dense_calibration_loss"],
            "metrics": evaluation.metrics,
            "dense_metrics": dense.metrics,
            "objective_params": info["objective_params"],
            "calibration_protocol": info["calibration_protocol"],
            "search_params": result.params,
            "search_info": result.info,
            "evaluation_protocol": evaluation.protocol,
            "cost": {
                "evaluations": result.evaluations,
                "layer_forwards": scorer.stats.layer_forwards,
                "layer_backwards": scorer.stats.layer_backwards,
                "search_seconds": result.seconds,
                "eval_seconds": evaluation.seconds,
                "eval_cached": evaluation.cached,
                "exhausted_budget": result.exhausted,
                "shared_prior": {"evaluations": self.n_layers,
                                 "layer_forwards": info["prior_cost"]["layer_forwards"]},
            },
            "trace": [[sorted(s), loss] for s, loss in result.trace],
            "environment": environment(str(self.device), str(next(self.model.parameters()).dtype)),
            "fingerprint": fingerprint(settings),
            "settings": settings,
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }

    def close(self) -> None:
        del self.model, self._scorers
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


class GridRunner:
    """Runs or resumes cells; keeps one model loaded at a time."""

    def __init__(self, results_dir: str | Path, device: str | None = None, redo: bool = False) -> None:
        self.results_dir = Path(results_dir)
        self.device = device
        self.redo = redo
        self._session: ModelSession | None = None
        self.ran: list[str] = []
        self.resumed: list[str] = []

    def session(self, grid: Grid, model_id: str) -> ModelSession:
        s = self._session
        if s is None or s.grid.name != grid.name or s.model_id != model_id:
            if s is not None:
                s.close()
            self._session = ModelSession(grid, model_id, cell_device(grid, self.device), self.results_dir)
        return self._session

    def result(self, grid: Grid, cell: Cell) -> dict[str, Any]:
        """The cell's result: the stored one if finished with the same settings, else a new run."""
        check_runnable(grid, cell, self.device)
        device = cell_device(grid, self.device)
        path = cell_path(self.results_dir, grid.name, cell.id)
        if not self.redo:
            stored = load_finished(path, fingerprint(cell_settings(grid, cell, device)))
            if stored is not None:
                self.resumed.append(cell.id)
                return stored
        result = self.session(grid, cell.model).run(cell)
        write_result(path, result)
        self.ran.append(cell.id)
        return result

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
