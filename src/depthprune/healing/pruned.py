"""A removed set of a loaded model, pruned and healed; and the healed result made from the unhealed one.

The one path every heal takes (``depthprune heal``, ``depthprune prune --heal``, the grids' heals): copy or
take the session's model, delete the removed blocks (:func:`~depthprune.model.masking.prune_layers`), cut
the healing text into windows, :func:`~depthprune.healing.lora.heal`. A healed result is the unhealed
result with the healed model's evaluation in place of its own, the heal in its identity (``heal``: method,
budget, seed) and its ``healing`` record; its fingerprint hashes the unhealed settings, the heal's
configuration and the healing data's fingerprint.
"""

from __future__ import annotations

import copy
import hashlib
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from torch import nn

from depthprune.common.jsonio import write_json_atomic
from depthprune.data.sources import training_windows
from depthprune.evaluation.evaluate import EvalResult, evaluate
from depthprune.healing.config import HealConfig
from depthprune.healing.lora import HealReport, dense_hidden, heal
from depthprune.model import STAND_IN_MARKER
from depthprune.model.masking import prune_layers
from depthprune.recipe import Session
from depthprune.results.provenance import environment, package_versions
from depthprune.results.schema import fingerprint, to_json


def heal_removed(session: Session, removed: Sequence[int], cfg: HealConfig, texts: Sequence[str],
                 data_fingerprint: Mapping[str, Any], in_place: bool = False,
                 progress: bool | str = False) -> tuple[nn.Module, HealReport]:
    """The session's model without ``removed``, healed; a copy unless ``in_place`` (the session's own model
    is then pruned and healed: it cannot search again)."""
    windows, protocol = training_windows(texts, session.tokenizer, cfg.seq_len, cfg.steps * cfg.batch_size,
                                         cfg.seed)
    dense = dense_targets(session.model, windows, cfg.batch_size) if cfg.method == "lora-hidden" else None
    model = session.model if in_place else copy.deepcopy(session.model)
    if in_place:
        session.drop_calibrations()  # their scorers saw the unpruned model
        _TARGETS.pop(model, None)  # and its hidden states are no longer the dense model's
    prune_layers(model, removed)
    healed, report = heal(model, windows, cfg, progress=progress,
                          window_protocol={**asdict(protocol), "data": dict(data_fingerprint)}, dense_states=dense)
    return healed, report


#: per loaded (dense) model, its last hidden states on each set of training windows: every set of a model heals
#: on the same windows, so ``lora-hidden``'s targets are computed once per model (issue 61)
_TARGETS: weakref.WeakKeyDictionary[nn.Module, dict[str, torch.Tensor]] = weakref.WeakKeyDictionary()


def dense_targets(model: nn.Module, windows: torch.Tensor, batch_size: int) -> torch.Tensor:
    """The dense ``model``'s last hidden states on ``windows`` (:func:`~depthprune.healing.lora.dense_hidden`),
    computed on first ask and kept while the model is loaded."""
    key = hashlib.sha256(windows.numpy().tobytes() + str(tuple(windows.shape)).encode()).hexdigest()
    cache = _TARGETS.setdefault(model, {})
    if key not in cache:
        cache[key] = dense_hidden(model, windows, batch_size)
    return cache[key]


def evaluate_unhealed(session: Session, removed: Sequence[int], cfg: Any) -> EvalResult:
    """The grid's own evaluation of ``removed`` on the session's (float32) model before any heal, never cached:
    what a heal is compared with (the grid's heals, the healing curve)."""
    return evaluate(session.model, session.tokenizer, session.spec.id, list(removed), session.profile, cfg,
                    cache_dir=None, weights=session.weights)


def evaluate_healed(session: Session, model: nn.Module, report: HealReport, cfg: Any) -> EvalResult:
    """The grid's own evaluation of a healed model (never cached; its weights named the loaded ones + the heal)."""
    tag = HealConfig.from_dict(report.config).tag
    return evaluate(model, session.tokenizer, session.spec.id, [], session.profile, cfg, cache_dir=None,
                    weights=f"{session.weights}+heal:{tag}")


def healed_result(unhealed: Mapping[str, Any], report: HealReport, evaluation: EvalResult | None,
                  eval_config: Any, device: str) -> dict[str, Any]:
    """The healed result of ``unhealed`` (a stored result of the same removed set)."""
    out = copy.deepcopy(to_json(unhealed))
    heal_cfg = HealConfig.from_dict(report.config)
    out["identity"] = {**out["identity"], "heal": heal_cfg.tag}
    settings = {**out["settings"], "identity": out["identity"], "dtype": "torch.float32", "healing": report.config,
                "healing_data": report.windows.get("data", {}), "peft": package_versions(("peft",))["peft"]}
    if evaluation is not None:
        settings["evaluation"] = asdict(eval_config)
    out.update({
        "evaluated": evaluation is not None,
        "metrics": evaluation.metrics if evaluation is not None else {},
        "item_outcomes": evaluation.items if evaluation is not None else {},
        "item_clusters": evaluation.clusters if evaluation is not None else {},
        "window_nll": evaluation.windows if evaluation is not None else {},
        "evaluation_protocol": evaluation.protocol if evaluation is not None else {},
        "healing": {**report.to_dict(), "unhealed_fingerprint": unhealed["fingerprint"],
                    "unhealed_metrics": dict(unhealed.get("metrics", {}))},
        "environment": environment(device, "torch.float32"),
        "settings": settings,
        "fingerprint": fingerprint(settings),
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    })
    out["cost"] = {**out["cost"], "heal_seconds": round(report.seconds, 3),
                   "eval_seconds": evaluation.seconds if evaluation is not None else 0.0}
    return out


def save_healed(session: Session, model: nn.Module, record: Mapping[str, Any], out_dir: str | Path) -> Path:
    """The healed, merged model as a standard checkpoint (``AutoModelForCausalLM.from_pretrained`` loads it),
    its tokenizer, and the heal's record (``depthprune.json``); a healed stand-in stays marked a stand-in."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.config.depthprune_healing = HealConfig.from_dict(dict(record["healing"]["config"])).tag
    model.save_pretrained(out)
    session.tokenizer.save_pretrained(out)
    write_json_atomic(out / "depthprune.json", dict(record))
    if session.stand_in:
        write_json_atomic(out / STAND_IN_MARKER, {"healed_from": session.spec.id, "weights": session.weights,
                                                  "removed": list(record["removed"])})
    return out
