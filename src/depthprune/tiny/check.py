"""Quality checks for the tiny family (``depthprune build tiny check``).

A thin recipe over the benchmark's own core -- nothing is measured here that the core
does not measure itself. For one model (a registry id or a model directory), opened as
``Session.open(model, profile="tiny")`` on CPU in float32:

* dense losses and the single-layer-removal sweep come from
  ``Session.calibrate(objective, ...)``: ``dense_loss`` and the prior f({i}), i.e. the
  benchmark's Scorer, objectives and masking (:mod:`depthprune.model.masking`). The sweep is
  ``prior[i] - dense_loss`` for

  - ``ppl`` on ``c4_train`` (the tiny profile's calibration setting, what searches see)
    and on ``c4_validation`` (same sizes: 32 seeded random 128-token windows of random
    documents longer than the window);
  - ``margin`` in its three answer forms (``cloze`` = the tiny profile's default,
    ``label``, ``option``), 128 items of the Commonsense-like set, seed 0; the margin
    loss is -(mean margin).

* the margin accuracy (share of items whose gold option has the highest mean
  log-prob) is read from the *same* calibration batches with the objective's own
  :meth:`~depthprune.objectives.margin.MarginObjective.option_logprobs` on the dense
  model; the loss recomputed from those log-probs must equal the scorer's dense loss;
* zero-shot accuracy (six tasks + LAMBADA-like) and the perplexity suite are
  ``Session.evaluate((), TINY.eval_config(limit=...))`` -- :mod:`depthprune.evaluation.evaluate`,
  next to the chance level of each task.

Results are stored under ``"evaluation"`` in the model's card.json (and README).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from depthprune.common.jsonio import read_json
from depthprune.common.machine import keeps_torch_threads

CHANCE = {"hellaswag": 0.25, "winogrande": 0.5, "arc_easy": 0.25, "arc_challenge": 0.25, "piqa": 0.5, "boolq": 0.5}

#: (card key, objective, parameters beyond the tiny profile's defaults)
CALIBRATIONS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("ppl_c4_train", "ppl", {}),
    ("ppl_c4_validation", "ppl", {"dataset": "c4_validation"}),
    ("margin_cloze", "margin", {"answer": "cloze"}),
    ("margin_label", "margin", {"answer": "label"}),
    ("margin_option", "margin", {"answer": "option"}),
)

NOTES = [
    "Measured through the benchmark's core (Session.calibrate / Session.evaluate). Earlier cards were "
    "measured by a second mechanism in tiny/check.py (its own layer removal, NLL, margin and lm-eval call); "
    "fed the same data, the core reproduces their dense losses and sweeps to rounding (<= 5e-5), so the "
    "differences from earlier cards are the protocol changes below.",
    "Protocol change: the dense C4-like validation loss used to be the first 128 tokens of each of the "
    "first 32 validation documents with >= 128 tokens; it is now the ppl objective's protocol: 32 random "
    "128-token windows of random documents longer than the window, seed 0.",
    "Protocol change: the label margin and its sweep used 64 items; all margins now use the tiny "
    "profile's 128 items (seed 0; the first 64 are the old ones). The cloze form (the tiny profile's "
    "calibration default) and the option form with their accuracies, the C4-like train sweep and the "
    "perplexity suite are new; the zero-shot settings are the tiny profile's (lm-eval, batch 32).",
]


def rounded(x: float, nd: int = 4) -> float | None:
    """A card's number: ``nd`` places, or None where it is not finite (JSON has no NaN). The real
    models' cards (:mod:`depthprune.cards.measure`) write theirs the same way."""
    return round(float(x), nd) if math.isfinite(x) else None


def portable(value: Any, assets: Path, shown_as: str) -> Any:
    """A protocol record without this machine's paths (``assets`` written as ``shown_as``) or empty fields:
    the tiny cards' and the real cards' (:mod:`depthprune.cards.measure`) records."""
    if isinstance(value, dict):
        return {k: portable(v, assets, shown_as) for k, v in value.items() if v not in (None, {}, [])}
    if isinstance(value, str) and value.startswith(str(assets)):
        return shown_as + value[len(str(assets)):]
    return value


def _portable(value: Any) -> Any:
    from depthprune.model.registry import TINY_ASSETS

    return portable(value, TINY_ASSETS, "assets/tiny")


def margin_accuracy(calib) -> float:
    """Share of items whose gold option has the highest mean log-prob, on the dense model.

    Runs the scorer's own dense forward over the calibration batches and asks the
    objective for its option log-probs; raises if the loss they imply differs from the
    scorer's dense loss (then this is not what the benchmark measured).
    """
    import torch

    obj, data = calib.objective, calib.scorer.data
    if not obj.share_prompt:
        raise ValueError("margin accuracy needs share_prompt=True (one item per packed row)")
    correct = items = 0
    loss = 0.0
    with torch.no_grad():
        for batch in data.batches:
            out = data.decoder.owner(**batch.model_inputs(data.device), use_cache=False)
            ell = obj.option_logprobs(out.last_hidden_state, batch, data.head).cpu()
            weights = batch.payload["weights"]
            loss += float((ell * weights).sum())
            row_of = torch.zeros(len(weights), dtype=torch.long).scatter_(0, batch.payload["option"],
                                                                          batch.payload["rows"])
            for r in row_of.unique():
                opts = (row_of == r).nonzero().flatten()
                gold = opts[weights[opts] < 0]
                correct += int(opts[ell[opts].argmax()] == gold[0])
                items += 1
    if not math.isclose(loss, calib.dense_loss, rel_tol=1e-6, abs_tol=1e-6):
        raise RuntimeError(f"margin accuracy: option log-probs give loss {loss}, the scorer {calib.dense_loss}")
    return correct / items


def _dense_entry(calib) -> dict[str, Any]:
    loss = calib.dense_loss
    params = calib.objective.params()
    if calib.name == "ppl":
        return {"loss": rounded(loss), "ppl": rounded(math.exp(loss), 3), "objective": params,
                "protocol": _portable(calib.objective.protocol())}
    proto = calib.objective.protocol()
    return {"mean_margin": rounded(-loss), "accuracy": rounded(margin_accuracy(calib)), "objective": params,
            "protocol": {k: proto[k] for k in ("n_items", "n_options", "options_per_item", "scored_tokens",
                                               "aggregation") if k in proto}}


def zero_shot_entry(evaluation, profile) -> dict[str, Any]:
    """``Session.evaluate`` metrics in the card's shape: per lm-eval task, next to chance."""
    m = evaluation.metrics
    out: dict[str, Any] = {}
    for task, chance in CHANCE.items():
        if f"{task}_acc" in m:
            out[profile.lm_eval_task(task)] = {k: rounded(m[f"{task}_{k}"]) for k in ("acc", "acc_norm")
                                               if f"{task}_{k}" in m} | {"chance": chance}
    if "lambada_acc" in m:
        out[profile.lm_eval_task("lambada")] = {"perplexity": rounded(m["lambada_ppl"]), "acc": rounded(m["lambada_acc"])}
    if "avg_acc" in m:
        out["avg_acc"] = rounded(m["avg_acc"])
    out["limit"] = evaluation.protocol["config"]["limit"]
    out["seconds"] = round(evaluation.seconds, 1)
    return out


@keeps_torch_threads
def check_model(model: str | Path, threads: int = 1, limit: int | None = None, sweep: bool = True,
                lm_eval: bool = True, write: bool = True, n_samples: int | None = None,
                n_items: int | None = None, device: str = "cpu",
                eval_settings: Mapping[str, Any] | None = None) -> dict:
    """Measure one tiny model through the core; with ``write``, store it in its card.

    ``n_samples`` / ``n_items`` override the tiny profile's ppl / margin sizes, ``eval_settings`` its evaluation
    settings (:class:`~depthprune.data.protocol.EvalConfig` fields; for tests, e.g. fewer windows);
    ``sweep=False`` keeps the dense losses only (the prior is computed either way).
    """
    import torch

    from depthprune.data.profiles import TINY
    from depthprune.recipe import Session

    from .train import write_card

    torch.set_num_threads(threads)
    session = Session.open(str(model), profile=TINY, device=device, dtype="float32")
    res: dict[str, Any] = {"recipe": {"session": {"model": session.spec.id, "profile": TINY.name,
                                                  "device": session.device, "dtype": session.dtype,
                                                  "weights": session.weights, "threads": threads},
                                      "losses": "Session.calibrate(objective, **params): dense_loss and prior",
                                      "zero_shot": "Session.evaluate((), TINY.eval_config(limit=limit))"},
                           "notes": NOTES, "dense": {}}
    deltas, seconds = {}, {}
    for key, objective, params in CALIBRATIONS:
        size = {"n_samples": n_samples} if objective == "ppl" else {"n_items": n_items}
        calib = session.calibrate(objective, **params, **size)
        res["dense"][key] = _dense_entry(calib)
        deltas[key] = [rounded(p - calib.dense_loss) for p in calib.prior]
        seconds[key] = round(calib.dense_seconds + calib.prior_seconds, 1)
    if sweep:
        res["single_layer_removal"] = {
            "definition": "delta[i] = Calibration.prior[i] - dense_loss: the objective's loss with block i "
                          "alone removed (depthprune.model.masking via the Scorer) minus the dense loss; margin "
                          "loss = -(mean margin)",
            **deltas, "seconds": seconds}
    if lm_eval:
        evaluation = session.evaluate((), TINY.eval_config(limit=limit, **(eval_settings or {})))
        res["perplexity"] = {k: rounded(v, 3) for k, v in evaluation.metrics.items() if k in ("wikitext2_ppl", "c4_ppl")}
        res["perplexity"]["protocol"] = _portable(evaluation.protocol["perplexity"])
        res["lm_eval"] = zero_shot_entry(evaluation, TINY)
    session.close()
    if write:
        model_dir = Path(session.spec.source)
        card = read_json(model_dir / "card.json")
        card["evaluation"] = res
        write_card(model_dir, card)
    return res
