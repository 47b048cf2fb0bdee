"""Measure a real model (``smollm2-135m``, ``gemma3-270m``) through the benchmark's core and write its card.

    depthprune measure card [--model smollm2-135m] [--steps tasks,margin,sweep] [--threads 1]
                            [--dtype float32] [--tasks T1,T2] [--objectives ppl,margin]

Four steps, each stored in ``card.json`` under ``measured`` (a step not run keeps what the
card had) and rendered into the README (every number there is of the dequantised weights, and the
card says so where they are shown):

* ``perplexity`` -- the dense model's perplexity suite alone (the profile's text splits, every
  window: ``Session.evaluate((), cfg)`` with no zero-shot task and no LAMBADA).
* ``tasks`` -- the dense model on the profile's tasks and perplexity suite:
  ``Session.evaluate((), cfg)`` (lm-eval on the in-memory model) with ``cfg`` the profile's
  evaluation widened to every item and every window (:data:`FULL_EVALUATION`), each task
  next to its chance level where known (:data:`CHANCE`); both acc and acc_norm are reported where the
  task has them. The tasks are the session profile's (``--tasks``: a subset of them), so a task the
  profile gains is measured by the same step.
* ``margin`` -- does the model read a listed option? The dense margin objective on the
  next-sentence train split (Commonsense-170k record format) in each answer form: ``label``
  (options listed, `` endingK`` scored), ``option`` (options listed, the option's text scored)
  and ``cloze`` (no list, the option continues the context), 128 items, seed 0: mean margin and
  accuracy (share of items whose gold option has the highest mean log-prob), against chance
  (margin 0, accuracy 1/4). The dense pass only (``Scorer``), no removal sweep.
* ``sweep`` -- the single-layer removal profile: ``Session.calibrate(objective).prior[i] -
  dense_loss`` for each of ``--objectives`` (default ``ppl`` and ``margin``) at the real profile's
  calibration defaults (what a grid search sees), with the wall time of the dense pass + the single
  removals.

``depthprune build real check`` runs the default (smollm2-135m, float32, every step but
``perplexity``, which ``tasks`` includes).
"""

from __future__ import annotations

import argparse
import math
import time
from types import SimpleNamespace
from typing import Any

from depthprune.cards.card import MODEL_ID, card_dir, identity, write
from depthprune.common.jsonio import read_json
from depthprune.tiny.check import margin_accuracy, portable, rounded

#: chance accuracy of a task where it is known (a task without an entry is shown without one)
CHANCE = {"nextsent": 0.25}
#: the card measures every item and window (the profile's own evaluation is a cheaper slice)
FULL_EVALUATION = {"limit": None, "perplexity": ("wikitext2", "c4"), "seq_len": 256, "c4_windows": 10_000}
MARGIN_FORMS = ("label", "option", "cloze")
MARGIN_ITEMS = 128
SWEEP_OBJECTIVES = ("ppl", "margin")


def _portable(value: Any) -> Any:
    from depthprune.model.registry import REAL_ASSETS

    return portable(value, REAL_ASSETS, "assets/real")


def _full_config(session, **overrides: Any):
    import dataclasses

    return dataclasses.replace(session.profile.eval_config(tasks=overrides.pop("tasks", None)),
                               **{**FULL_EVALUATION, **overrides})


def _perplexity(evaluation) -> dict[str, Any]:
    m = evaluation.metrics
    return {"perplexity": {k: rounded(m[k], 3) for k in ("wikitext2_ppl", "c4_ppl") if k in m},
            "perplexity_protocol": _portable(evaluation.protocol["perplexity"])}


def measure_perplexity(session) -> dict[str, Any]:
    """The dense perplexity suite on every window of the profile's text splits, no zero-shot task."""
    cfg = _full_config(session, tasks=(), lambada=False)
    evaluation = session.evaluate((), cfg)
    return {**_perplexity(evaluation), "config": evaluation.protocol["config"],
            "seconds": round(evaluation.seconds, 1)}


def measure_tasks(session, tasks: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The profile's tasks (``tasks``: a subset of them; default all), LAMBADA and the perplexity suite."""
    profile = session.profile
    cfg = _full_config(session, tasks=tasks)
    evaluation = session.evaluate((), cfg)
    m = evaluation.metrics
    counts = evaluation.protocol["zero_shot"]["tasks"]
    out: dict[str, Any] = {}
    for task in cfg.tasks:
        name = profile.lm_eval_task(task)
        out[name] = {k: rounded(m[f"{task}_{k}"]) for k in ("acc", "acc_norm") if f"{task}_{k}" in m} | {
            "acc_stderr": rounded(m.get(f"{task}_acc_stderr", math.nan)),
            "acc_norm_stderr": rounded(m.get(f"{task}_acc_norm_stderr", math.nan)),
            "chance": CHANCE.get(task), "headline": profile.headline_metric(task),
            "n": counts[name]["n_samples"]["effective"]}
    if cfg.lambada:
        name = profile.lm_eval_task("lambada")
        out[name] = {"acc": rounded(m["lambada_acc"]), "perplexity": rounded(m["lambada_ppl"], 3),
                     "chance": "~0 (open vocabulary)", "n": counts[name]["n_samples"]["effective"]}
    return {"tasks": out, "avg_acc": rounded(m.get("avg_acc", math.nan)), **_perplexity(evaluation),
            "config": evaluation.protocol["config"], "seconds": round(evaluation.seconds, 1)}


def measure_margins(session, n_items: int = MARGIN_ITEMS) -> dict[str, Any]:
    """Dense margin in each answer form (the scorer's dense pass; accuracy from the same batches)."""
    from depthprune.objectives import make_objective
    from depthprune.scoring.scorer import Scorer

    out: dict[str, Any] = {}
    for form in MARGIN_FORMS:
        start = time.perf_counter()
        obj = make_objective("margin", session.profile, n_items=n_items, answer=form)
        scorer = Scorer(session.model, obj.prepare(session.tokenizer, session.profile, session.batch_size), obj)
        calib = SimpleNamespace(objective=obj, scorer=scorer, dense_loss=scorer.dense_loss)
        proto = obj.protocol()
        out[form] = {"mean_margin": rounded(-scorer.dense_loss), "accuracy": rounded(margin_accuracy(calib)),
                     "chance": {"mean_margin": 0.0, "accuracy": 0.25}, "objective": obj.params(),
                     "scored_tokens": proto.get("scored_tokens"), "seconds": round(time.perf_counter() - start, 1)}
    return out


def measure_sweep(session, objectives: tuple[str, ...] = SWEEP_OBJECTIVES) -> dict[str, Any]:
    out: dict[str, Any] = {"definition": "delta[i] = Session.calibrate(objective).prior[i] - dense_loss (block i "
                                         "alone removed, depthprune.model.masking via the Scorer); margin loss = "
                                         "-(mean margin); the real profile's calibration defaults"}
    for objective in objectives:
        calib = session.calibrate(objective)
        out[objective] = {
            "objective": calib.objective.params(),
            # the data file itself: a profile may re-point a dataset name (commonsense170k) to other data
            "source": _portable(calib.objective.protocol().get("source", {})),
            "dense_loss": rounded(calib.dense_loss, 5),
            "delta": [rounded(p - calib.dense_loss, 5) for p in calib.prior],
            "dense_seconds": round(calib.dense_seconds, 1), "prior_seconds": round(calib.prior_seconds, 1),
            "prior_evaluations": len(calib.prior), "layer_forwards": calib.scorer.stats.layer_forwards,
            "naive_layer_forwards": (1 + len(calib.prior)) * session.n_layers,
        }
    return out


def _sizes(r: dict[str, Any]) -> str:
    o = r["objective"]
    if "seq_len" in o:
        split = "calibration split" if o.get("dataset", "c4_train") == "c4_train" else f"{o['dataset']} split"
        return f"{o['n_samples']} windows x {o['seq_len']} tokens of the {split}"
    return f"{o['n_items']} items, answer={o['answer']}"


def render(measured: dict[str, Any], model_id: str = MODEL_ID) -> str:
    ident = identity(model_id)
    quant = ident["weights_measured"]
    lines = [f"## Measured (`depthprune measure card --model {model_id}`)", ""]
    env = measured.get("environment", {})
    if env:
        dtype = str(env.get("dtype", "")).removeprefix("torch.")
        load = f"; load {env['load_seconds']} s (`Session.open`)" if env.get("load_seconds") is not None else ""
        lines += [f"CPU, {dtype}, {env.get('threads')} torch thread(s); weights `{env.get('weights')}`: "
                  f"**{quant}**, so every number below is the dequantised copy's{load}.", ""]
    t = measured.get("tasks")
    if t:
        lines += [f"Dense model, {quant}, `Session.evaluate((), cfg)`, every item and window ({t['seconds']} s):",
                  "", "| task | n | acc | acc_norm | chance | headline |", "|---|---|---|---|---|---|"]
        for name, r in t["tasks"].items():
            chance = "" if r.get("chance") is None else r["chance"]
            if "perplexity" in r:
                lines.append(f"| {name} | {r['n']} | {r['acc']} (ppl {r['perplexity']}) | | {chance} | acc |")
            else:
                norm = f"{r['acc_norm']} ± {r['acc_norm_stderr']}" if "acc_norm" in r else ""
                lines.append(f"| {name} | {r['n']} | {r['acc']} ± {r['acc_stderr']} | {norm} | {chance} "
                             f"| {r['headline']} |")
        lines.append("")
    ppl = measured.get("perplexity") or t
    if ppl:
        windows = ", ".join(f"{k}: {v['n_samples']} windows x {v['seq_len']}, {v['predicted_tokens']:,} predicted "
                            f"tokens" for k, v in ppl.get("perplexity_protocol", {}).items())
        source = "" if ppl is t else f" (`Session.evaluate((), cfg)`, no zero-shot task, {ppl['seconds']} s)"
        lines += [f"Dense perplexity{source}, {quant}:", "", "| perplexity suite | value |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in ppl["perplexity"].items()]
        lines += ["", f"(wikitext2_ppl = the real profile's test split, c4_ppl = its validation split, contiguous "
                  f"windows{'; ' + windows if windows else ''}; see card.json for the protocol)", ""]
    mg = measured.get("margin")
    if mg:
        lines += [f"Does the model read listed options? Dense margin objective, {quant}, on the next-sentence train "
                  f"split (Commonsense-170k format), {MARGIN_ITEMS} items, seed 0 (chance: margin 0, accuracy 0.25):",
                  "", "| answer form | what is scored | mean margin | accuracy |", "|---|---|---|---|"]
        what = {"label": "options listed; ` endingK` after `the correct answer is`",
                "option": "options listed; the option's text after `the correct answer is`",
                "cloze": "no list; the option as the continuation of the 2-sentence context"}
        lines += [f"| {f} | {what[f]} | {r['mean_margin']} | {r['accuracy']} |" for f, r in mg.items()]
        if ident.get("margin_decision"):
            lines += ["", ident["margin_decision"]]
        lines.append("")
    sw = measured.get("sweep")
    if sw:
        objectives = [o for o in SWEEP_OBJECTIVES if o in sw] + [o for o in sw if o not in (*SWEEP_OBJECTIVES,
                                                                                             "definition")]
        n = len(sw[objectives[0]]["delta"])
        lines += [f"Single-layer removal, {quant}: " + sw["definition"] + ".", ""]
        for o in objectives:
            r = sw[o]
            dense = (f"ppl {math.exp(r['dense_loss']):.2f}" if o == "ppl"
                     else f"mean margin {-r['dense_loss']:.4f}" if o == "margin" else "")
            files = (r.get("source") or {}).get("data_files") or {}
            data = f" (`{next(iter(files.values()))}`)" if files else ""
            lines.append(f"* {o}: {_sizes(r)}{data}, seed {r['objective']['seed']}; dense loss {r['dense_loss']}"
                         f"{f' ({dense})' if dense else ''}; dense pass {r['dense_seconds']} s + {n} removals "
                         f"{r['prior_seconds']} s; {r['layer_forwards']} layer-forwards "
                         f"(naive {r['naive_layer_forwards']})")
        lines += ["", "These deltas rest on the calibration sets above (the real profile's defaults when the sweep ran; "
                  f"the real grid, {ident.get('grid', 'cases/real.toml')}, now calibrates on the sizes its "
                  "calibration-size curve chose), far smaller than the paper's, so they are noisy"
                  + ("; a negative margin delta means the model without that block prefers the right endings of "
                     f"these {sw['margin']['objective']['n_items']} items by more than the dense model does"
                     if "margin" in sw else "") + ".", "",
                  "| block | " + " | ".join(f"Δ {o} loss" for o in objectives) + " |",
                  "|---|" + "---|" * len(objectives)]
        lines += [f"| {i} | " + " | ".join(f"{sw[o]['delta'][i]:+.4f}" for o in objectives) + " |" for i in range(n)]
        lines.append("")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``depthprune measure card``."""
    from depthprune.model.registry import REAL_MODELS

    p.add_argument("--model", default=MODEL_ID, choices=sorted(REAL_MODELS))
    p.add_argument("--steps", default="tasks,margin,sweep", help="of perplexity, tasks, margin, sweep")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dtype", default="float32", help="the session's dtype (float32, bfloat16, auto)")
    p.add_argument("--tasks", default=None, help="the tasks step's tasks (default: the profile's)")
    p.add_argument("--objectives", default=",".join(SWEEP_OBJECTIVES), help="the sweep step's objectives")
    p.add_argument("--render-only", action="store_true",
                   help="rewrite the card's README.md and card.json from its stored measurements (no model load)")


def run(args: argparse.Namespace) -> int:
    """``depthprune measure card``: each step's measurement into the card (an unknown step: a usage error)."""
    import torch

    from depthprune.common.errors import InputError
    from depthprune.recipe import Session

    steps = [s for s in args.steps.split(",") if s]
    unknown = sorted(set(steps) - {"perplexity", "tasks", "margin", "sweep"})
    if unknown:
        raise InputError(f"--steps: unknown step(s) {', '.join(unknown)}; allowed: perplexity, tasks, margin, sweep")
    tasks = tuple(t for t in args.tasks.split(",") if t) if args.tasks is not None else None
    objectives = tuple(o for o in args.objectives.split(",") if o)
    identity(args.model)  # a model without a card identity fails before anything is loaded
    if args.render_only:
        path = card_dir(args.model) / "card.json"
        stored = read_json(path).get("measured") if path.is_file() else None
        print(write(stored, render(stored, args.model) if stored else "", args.model))
        return 0
    torch.set_num_threads(args.threads)
    card_path = card_dir(args.model) / "card.json"
    measured = read_json(card_path).get("measured", {}) if card_path.is_file() else {}
    start = time.perf_counter()
    session = Session.open(args.model, device="cpu", dtype=args.dtype)
    measured["environment"] = {"threads": args.threads, "weights": session.weights, "dtype": session.dtype,
                               "load_seconds": round(time.perf_counter() - start, 1)}
    run = {"perplexity": measure_perplexity, "tasks": lambda s: measure_tasks(s, tasks),
           "margin": measure_margins, "sweep": lambda s: measure_sweep(s, objectives)}
    for step in steps:
        t0 = time.perf_counter()
        measured[step] = run[step](session)
        print(f"{step}: {time.perf_counter() - t0:.1f} s", flush=True)
        write(measured, render(measured, args.model), args.model)  # after every step: a killed run keeps it
    session.close()
    return 0
