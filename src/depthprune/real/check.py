"""Measure ``smollm2-135m`` through the benchmark's core and write its card.

    python -m depthprune.real.check [--steps tasks,margin,sweep] [--threads 1]

Three steps, each stored in ``card.json`` under ``measured`` (a step not run keeps what the
card had) and rendered into the README:

* ``tasks`` -- the dense model on the real profile's tasks and perplexity suite:
  ``Session.evaluate((), cfg)`` (lm-eval on the in-memory model) with ``cfg`` the profile's
  evaluation widened to every item and every window (:data:`FULL_EVALUATION`), each task
  next to its chance level; both acc and acc_norm are reported (fixed with the tasks'
  construction, :mod:`depthprune.real.build`).
* ``margin`` -- does the model read a listed option? The dense margin objective on the
  next-sentence train split (Commonsense-170k record format) in each answer form: ``label``
  (options listed, `` endingK`` scored), ``option`` (options listed, the option's text scored)
  and ``cloze`` (no list, the option continues the context), 128 items, seed 0: mean margin and
  accuracy (share of items whose gold option has the highest mean log-prob), against chance
  (margin 0, accuracy 1/4). The dense pass only (``Scorer``), no removal sweep.
* ``sweep`` -- the single-layer removal profile: ``Session.calibrate(objective).prior[i] -
  dense_loss`` for ``ppl`` and ``margin`` at the real profile's calibration defaults (what a
  grid search sees), with the wall time of the dense pass + the 30 single removals.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from types import SimpleNamespace
from typing import Any

from depthprune.real.card import CARD_DIR, MODEL_ID, write

CHANCE = {"nextsent": 0.25}
#: the card measures every item and window (the profile's own evaluation is a cheaper slice)
FULL_EVALUATION = {"limit": None, "perplexity": ("wikitext2", "c4"), "seq_len": 256, "c4_windows": 10_000}
MARGIN_FORMS = ("label", "option", "cloze")
MARGIN_ITEMS = 128
MARGIN_DECISION = ("The label and option forms are at chance (accuracy 0.25 = 1/4, mean margin ~0): the model does "
                   "not bind a listed option to its label or text. The cloze form is far above chance, so the real "
                   "profile (and cases/smollm2.toml) calibrates the margin objective in cloze form, as the tiny "
                   "profile does; the paper's label form would calibrate on noise here.")


def _round(x: float, nd: int = 4) -> float | None:
    return round(float(x), nd) if math.isfinite(x) else None


def _portable(value: Any) -> Any:
    from depthprune.models import REAL_ASSETS

    if isinstance(value, dict):
        return {k: _portable(v) for k, v in value.items() if v not in (None, {}, [])}
    if isinstance(value, str) and value.startswith(str(REAL_ASSETS)):
        return "assets/real" + value[len(str(REAL_ASSETS)):]
    return value


def measure_tasks(session) -> dict[str, Any]:
    import dataclasses

    from depthprune.profiles import REAL

    cfg = dataclasses.replace(REAL.eval_config(), **FULL_EVALUATION)
    evaluation = session.evaluate((), cfg)
    m = evaluation.metrics
    tasks: dict[str, Any] = {}
    for task in cfg.tasks:
        tasks[REAL.lm_eval_task(task)] = {k: _round(m[f"{task}_{k}"]) for k in ("acc", "acc_norm")} | {
            "acc_stderr": _round(m.get(f"{task}_acc_stderr", math.nan)),
            "acc_norm_stderr": _round(m.get(f"{task}_acc_norm_stderr", math.nan)),
            "chance": CHANCE[task], "headline": REAL.headline_metric(task),
            "n": evaluation.protocol["zero_shot"]["tasks"][REAL.lm_eval_task(task)]["n_samples"]["effective"]}
    tasks[REAL.lm_eval_task("lambada")] = {"acc": _round(m["lambada_acc"]), "perplexity": _round(m["lambada_ppl"], 3),
                                           "chance": "~0 (open vocabulary)",
                                           "n": evaluation.protocol["zero_shot"]["tasks"][REAL.lm_eval_task("lambada")]
                                           ["n_samples"]["effective"]}
    return {"tasks": tasks, "avg_acc": _round(m["avg_acc"]),
            "perplexity": {k: _round(m[k], 3) for k in ("wikitext2_ppl", "c4_ppl") if k in m},
            "perplexity_protocol": _portable(evaluation.protocol["perplexity"]),
            "config": evaluation.protocol["config"], "seconds": round(evaluation.seconds, 1)}


def measure_margins(session, n_items: int = MARGIN_ITEMS) -> dict[str, Any]:
    """Dense margin in each answer form (the scorer's dense pass; accuracy from the same batches)."""
    from depthprune.objectives import make_objective
    from depthprune.scoring import Scorer
    from depthprune.tiny.check import margin_accuracy

    out: dict[str, Any] = {}
    for form in MARGIN_FORMS:
        start = time.perf_counter()
        obj = make_objective("margin", session.profile, n_items=n_items, answer=form)
        scorer = Scorer(session.model, obj.prepare(session.tokenizer, session.profile, session.batch_size), obj)
        calib = SimpleNamespace(objective=obj, scorer=scorer, dense_loss=scorer.dense_loss)
        proto = obj.protocol()
        out[form] = {"mean_margin": _round(-scorer.dense_loss), "accuracy": _round(margin_accuracy(calib)),
                     "chance": {"mean_margin": 0.0, "accuracy": 0.25}, "objective": obj.params(),
                     "scored_tokens": proto.get("scored_tokens"), "seconds": round(time.perf_counter() - start, 1)}
    return out


def measure_sweep(session) -> dict[str, Any]:
    out: dict[str, Any] = {"definition": "delta[i] = Session.calibrate(objective).prior[i] - dense_loss (block i "
                                         "alone removed, depthprune.masking via the Scorer); margin loss = "
                                         "-(mean margin); the real profile's calibration defaults"}
    for objective in ("ppl", "margin"):
        calib = session.calibrate(objective)
        out[objective] = {
            "objective": calib.objective.params(), "dense_loss": _round(calib.dense_loss, 5),
            "delta": [_round(p - calib.dense_loss, 5) for p in calib.prior],
            "dense_seconds": round(calib.dense_seconds, 1), "prior_seconds": round(calib.prior_seconds, 1),
            "prior_evaluations": len(calib.prior), "layer_forwards": calib.scorer.stats.layer_forwards,
            "naive_layer_forwards": (1 + len(calib.prior)) * session.n_layers,
        }
    return out


def render(measured: dict[str, Any]) -> str:
    lines = ["## Measured (`python -m depthprune.real.check`)", ""]
    env = measured.get("environment", {})
    if env:
        lines += [f"CPU, float32, {env.get('threads')} torch thread(s); session: weights `{env.get('weights')}`.", ""]
    t = measured.get("tasks")
    if t:
        lines += [f"Dense model, `Session.evaluate((), cfg)`, every item and window ({t['seconds']} s):", "",
                  "| task | n | acc | acc_norm | chance | headline |", "|---|---|---|---|---|---|"]
        for name, r in t["tasks"].items():
            if "acc_norm" in r:
                lines.append(f"| {name} | {r['n']} | {r['acc']} ± {r['acc_stderr']} | {r['acc_norm']} ± "
                             f"{r['acc_norm_stderr']} | {r['chance']} | {r['headline']} |")
            else:
                lines.append(f"| {name} | {r['n']} | {r['acc']} (ppl {r['perplexity']}) | | {r['chance']} | acc |")
        lines += ["", "| perplexity suite | value |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in t["perplexity"].items()]
        lines += ["", "(wikitext2_ppl = the test split, c4_ppl = the validation split, contiguous windows; "
                  "see card.json for the protocol)", ""]
    mg = measured.get("margin")
    if mg:
        lines += ["Does the model read listed options? Dense margin objective on the next-sentence train split "
                  f"(Commonsense-170k format), {MARGIN_ITEMS} items, seed 0 (chance: margin 0, accuracy 0.25):", "",
                  "| answer form | what is scored | mean margin | accuracy |", "|---|---|---|---|"]
        what = {"label": "options listed; ` endingK` after `the correct answer is`",
                "option": "options listed; the option's text after `the correct answer is`",
                "cloze": "no list; the option as the continuation of the 2-sentence context"}
        lines += [f"| {f} | {what[f]} | {r['mean_margin']} | {r['accuracy']} |" for f, r in mg.items()]
        lines += ["", MARGIN_DECISION]
        lines.append("")
    sw = measured.get("sweep")
    if sw:
        p, m = sw["ppl"], sw["margin"]
        lines += ["Single-layer removal: " + sw["definition"] + ".", "",
                  f"* ppl: {p['objective']['n_samples']} windows x {p['objective']['seq_len']} tokens of the "
                  f"calibration split, seed {p['objective']['seed']}; dense loss {p['dense_loss']} "
                  f"(ppl {math.exp(p['dense_loss']):.2f}); dense pass {p['dense_seconds']} s + 30 removals "
                  f"{p['prior_seconds']} s; {p['layer_forwards']} layer-forwards "
                  f"(naive {p['naive_layer_forwards']})",
                  f"* margin: {m['objective']['n_items']} items, answer={m['objective']['answer']}, seed "
                  f"{m['objective']['seed']}; dense loss {m['dense_loss']} (mean margin {-m['dense_loss']:.4f}); "
                  f"dense pass {m['dense_seconds']} s + 30 removals {m['prior_seconds']} s; "
                  f"{m['layer_forwards']} layer-forwards (naive {m['naive_layer_forwards']})", "",
                  "These are the grid's calibration sets (cases/smollm2.toml, ~1k tokens per objective), far smaller "
                  "than the paper's, so the deltas are noisy; a negative margin delta means the model without that "
                  "block prefers the right endings of these 8 items by more than the dense model does.", "",
                  "| block | Δ ppl loss | Δ margin loss |", "|---|---|---|"]
        lines += [f"| {i} | {a:+.4f} | {b:+.4f} |" for i, (a, b) in enumerate(zip(p["delta"], m["delta"]))]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import torch

    from depthprune.recipe import Session

    p = argparse.ArgumentParser(prog="python -m depthprune.real.check", description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", default="tasks,margin,sweep")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    steps = [s for s in args.steps.split(",") if s]
    torch.set_num_threads(args.threads)
    card_path = CARD_DIR / "card.json"
    measured = json.loads(card_path.read_text()).get("measured", {}) if card_path.is_file() else {}
    start = time.perf_counter()
    session = Session.open(MODEL_ID, device="cpu", dtype="float32")
    measured["environment"] = {"threads": args.threads, "weights": session.weights, "dtype": session.dtype,
                               "load_seconds": round(time.perf_counter() - start, 1)}
    for step in steps:
        t0 = time.perf_counter()
        measured[step] = {"tasks": measure_tasks, "margin": measure_margins, "sweep": measure_sweep}[step](session)
        print(f"{step}: {time.perf_counter() - t0:.1f} s", flush=True)
        write(measured, render(measured))  # after every step: a killed run keeps what it measured
    session.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
