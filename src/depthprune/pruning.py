"""The pruning recipe: model + objective + searcher + budget -> removed layers (+ checkpoint).

One readable function, :func:`prune`, used by the CLI and the grid alike:

1. resolve the model and check the budget against its layer count (before loading);
2. load the model; build the objective's calibration batches;
3. wrap them in a :class:`~depthprune.scoring.Scorer`;
4. run the searcher on the scorer;
5. optionally delete the removed blocks and ``save_pretrained`` a standard checkpoint.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from depthprune.env import environment
from depthprune.masking import prune_layers
from depthprune.models import ModelSpec, load_model, locate, resolve, resolve_device, resolve_dtype
from depthprune.objectives import OBJECTIVES, make_objective
from depthprune.scoring import Scorer
from depthprune.search import SEARCHERS, SearchResult, get_searcher


@dataclass
class PruneConfig:
    model: str
    objective: str = "ppl"
    search: str = "greedy"
    budget: int = 1
    seed: int = 0
    device: str = "auto"
    dtype: str = "auto"
    calib_samples: int | None = None  # ppl: windows; margin: items (None = profile default)
    seq_len: int | None = None
    batch_size: int = 8
    search_params: dict[str, Any] = field(default_factory=dict)
    objective_params: dict[str, Any] = field(default_factory=dict)
    protected: tuple[int, ...] = ()
    allow_download: bool = False
    progress: bool = False
    profile: str | None = None  # data profile; None = the model's own


@dataclass
class PruneRun:
    config: PruneConfig
    spec: ModelSpec
    result: SearchResult
    dense_loss: float
    scorer: Scorer
    model: Any
    tokenizer: Any
    objective_params: dict[str, Any]
    protocol: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.spec.id,
            "model_source": self.spec.source,
            "objective": self.config.objective,
            "objective_params": self.objective_params,
            "calibration_protocol": self.protocol,
            "search": self.result.to_dict(),
            "budget": self.config.budget,
            "seed": self.config.seed,
            "n_layers": self.scorer.n_layers,
            "removed": list(self.result.removed),
            "loss": self.result.loss,
            "dense_loss": self.dense_loss,
            "cost": {
                "evaluations": self.result.evaluations,
                "layer_forwards": self.scorer.stats.layer_forwards,
                "seconds": self.result.seconds,
                "scorer": self.scorer.stats.to_dict(),
            },
            "environment": environment(str(self.scorer.device), str(next(self.model.parameters()).dtype)),
        }


def count_layers(model: str | ModelSpec, allow_download: bool = False) -> int:
    """Layer count from ``config.json`` alone (no weights loaded)."""
    from transformers import AutoConfig

    spec = resolve(model)
    if spec.n_layers is not None and not spec.is_local:
        return spec.n_layers
    config = AutoConfig.from_pretrained(locate(spec, allow_download=allow_download))
    config = getattr(config, "text_config", None) or config
    return int(config.num_hidden_layers)


def check_config(cfg: PruneConfig) -> tuple[ModelSpec, int]:
    """Validate everything that can be checked without loading weights."""
    if cfg.objective not in OBJECTIVES:
        raise ValueError(f"--objective {cfg.objective!r} is unknown; allowed: {', '.join(sorted(OBJECTIVES))}")
    if cfg.search not in SEARCHERS:
        raise ValueError(f"--search {cfg.search!r} is unknown; allowed: {', '.join(sorted(SEARCHERS))}")
    get_searcher(cfg.search, **cfg.search_params)  # parameter names
    spec = resolve(cfg.model)
    if cfg.profile is not None:
        if cfg.profile not in ("paper", "tiny"):
            raise ValueError(f"--profile {cfg.profile!r} is unknown; allowed: paper, tiny")
        spec = replace(spec, profile=cfg.profile)
    n_layers = count_layers(spec, cfg.allow_download)
    allowed = n_layers - len(set(cfg.protected))
    if not 0 <= cfg.budget < allowed:
        raise ValueError(f"--budget {cfg.budget} is out of range: {spec.id} has {n_layers} layers"
                         f"{f' ({len(set(cfg.protected))} protected)' if cfg.protected else ''}; allowed 0..{allowed - 1}")
    resolve_dtype(cfg.dtype, resolve_device(cfg.device))
    return spec, n_layers


def build_scorer(model, tokenizer, spec: ModelSpec, objective_name: str, batch_size: int,
                 **objective_params: Any) -> tuple[Scorer, dict[str, Any], dict[str, Any]]:
    """Calibration batches + scorer for one model and objective."""
    objective = make_objective(objective_name, spec.profile, **objective_params)
    batches = objective.prepare(tokenizer, spec.profile, batch_size)
    scorer = Scorer(model, batches, objective)
    return scorer, objective.params(), objective.protocol()


def prune(cfg: PruneConfig) -> PruneRun:
    spec, _n = check_config(cfg)
    device = resolve_device(cfg.device)
    model, tokenizer = load_model(spec, device=device, dtype=cfg.dtype, allow_download=cfg.allow_download)
    size_params: dict[str, Any] = {}
    if cfg.calib_samples is not None:
        size_params["n_items" if cfg.objective == "margin" else "n_samples"] = cfg.calib_samples
    if cfg.seq_len is not None:
        size_params["seq_len"] = cfg.seq_len
    torch.manual_seed(cfg.seed)
    scorer, obj_params, protocol = build_scorer(
        model, tokenizer, spec, cfg.objective, cfg.batch_size, **size_params, **cfg.objective_params
    )
    searcher = get_searcher(cfg.search, progress=f"{cfg.search}" if cfg.progress else False, **cfg.search_params)
    result = searcher.search(
        n_layers=scorer.n_layers, budget=cfg.budget, score=scorer, seed=cfg.seed, protected=frozenset(cfg.protected)
    )
    return PruneRun(cfg, spec, result, scorer.dense_loss, scorer, model, tokenizer, obj_params, protocol)


def save_pruned(run: PruneRun, out_dir: str | Path) -> Path:
    """Delete the removed blocks and write a standard HF checkpoint (+ tokenizer, + provenance)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prune_layers(run.model, run.result.removed)
    run.model.save_pretrained(out)
    run.tokenizer.save_pretrained(out)
    (out / "depthprune.json").write_text(json.dumps({**run.to_dict(), "config": asdict(run.config)},
                                                     indent=2, default=str) + "\n")
    return out
