"""What a rehearsal cell must satisfy: invariants, never reference numbers.

A stand-in has random weights, so its losses and accuracies mean nothing; what the rehearsal
proves is that the paper path *runs* and produces what it says it produces:

* the result validates against the schema and is flagged ``stand_in``, with the cell's identity;
* the removed set has M distinct layers of the real layer count;
* the cost is what the searcher predicts (:meth:`depthprune.search.base.Searcher.evaluation_bounds`:
  exact where the settings fix it, within its bounds otherwise) and what a replay of its requests through a private scorer
  counts (:func:`depthprune.scoring.scorer.replay_cost`);
* calibration shapes are the case file's (windows x tokens, items, the label answer form), every
  metric of the paper's evaluation is there, in range, over the predicted number of windows and
  items;
* the pruned checkpoint saved by the recipe reloads with L - M layers, the architecture features
  of the original, the stand-in marker, and logits identical to the in-memory view.

Every check returns a list of problems (empty: the cell passes), so a failing cell names all of them.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from depthprune.grid.cases import Cell, Grid
from depthprune.model import MODELS, STAND_IN_MARKER, is_stand_in
from depthprune.results.schema import Result, ResultError, validate
from depthprune.scoring.scorer import replay_cost
from depthprune.search import get_searcher

#: metrics the paper's evaluation must produce (plus <task>_acc per task)
PPL_METRICS = ("wikitext2_ppl", "c4_ppl", "lambada_ppl", "lambada_acc", "avg_acc")
ACC_NORM_TASKS = ("hellaswag", "arc_easy", "arc_challenge", "piqa")


def check_result(result: Result, grid: Grid, cell: Cell,
                 eval_items: dict[str, int] | None = None) -> list[str]:
    """Problems with a finished rehearsal cell (see the module docstring); ``eval_items``: each
    lm-eval task's evaluation-split size in the stand-in data (to predict the items evaluated)."""
    problems: list[str] = []
    try:
        ident = validate(result, cell.id).identity
    except ResultError as err:
        return [f"schema: {err}"]
    n_layers = MODELS[cell.model].n_layers
    if n_layers is None:
        return [f"model {cell.model} has no registered layer count: a rehearsal cell needs one"]
    expect = {"stand_in": True, "grid": grid.name, "model": cell.model, "objective": cell.objective,
              "search": cell.search, "budget": cell.budget, "search_seed": cell.seed, "profile": "paper"}
    for key, value in expect.items():
        if getattr(ident, key) != value:
            problems.append(f"identity.{key} = {getattr(ident, key)!r}, expected {value!r}")
    if result["n_layers"] != n_layers:
        problems.append(f"n_layers {result['n_layers']} != the real model's {n_layers}")
    removed = result["removed"]
    if (len(removed) != cell.budget or sorted(set(removed)) != removed
            or not all(0 <= i < result["n_layers"] for i in removed)):
        problems.append(f"removed {removed}: expected {cell.budget} distinct sorted layers in 0..{n_layers - 1}")
    for key in ("calibration_loss", "dense_calibration_loss"):
        if not math.isfinite(result[key]):
            problems.append(f"{key} is {result[key]}")
    if len(result["prior"]) != n_layers or any(x is None for x in result["prior"]):
        problems.append(f"prior: {len(result['prior'])} values (non-finite: {result['prior'].count(None)}), "
                        f"expected {n_layers} finite")
    problems += _check_settings(result, grid)
    problems += _check_calibration(result, grid, cell)
    problems += check_cost(result, grid, cell)
    problems += _check_evaluation(result, grid, eval_items or {})
    return problems


def _check_settings(result: Mapping[str, Any], grid: Grid) -> list[str]:
    s = result["settings"]
    from depthprune.model import resolve_dtype

    problems = []
    want_dtype = str(resolve_dtype(grid.dtype, s["device"]))
    if s["dtype"] != want_dtype:
        problems.append(f"dtype {s['dtype']} != the grid's {want_dtype}")
    if s["batch_size"] != grid.batch_size:
        problems.append(f"batch size {s['batch_size']} != the grid's {grid.batch_size}")
    return problems


def _check_calibration(result: Mapping[str, Any], grid: Grid, cell: Cell) -> list[str]:
    params, proto = result["objective_params"], result["calibration_protocol"]
    wanted = grid.objective_params.get(cell.objective, {})
    problems = [f"objective {key} = {params.get(key)!r}, case file says {value!r}"
                for key, value in wanted.items() if params.get(key) != value]
    if cell.objective in ("ppl", "kl"):
        if proto.get("kind") != "random-doc" or proto.get("seq_len") != params["seq_len"] \
                or proto.get("n_samples") != params["n_samples"]:
            problems.append(f"calibration windows {proto.get('n_samples')} x {proto.get('seq_len')} "
                            f"({proto.get('kind')}), expected {params['n_samples']} x {params['seq_len']} random-doc")
    elif cell.objective == "margin":
        if proto.get("n_items") != params["n_items"]:
            problems.append(f"margin items {proto.get('n_items')}, expected {params['n_items']}")
        if params.get("answer") != "label" and "answer" not in wanted:
            problems.append(f"margin answer form {params.get('answer')!r}: the paper grid scores the label")
        if not proto.get("n_options") or proto["n_options"] < 2 * params["n_items"]:
            problems.append(f"margin options {proto.get('n_options')} for {params['n_items']} items")
    return problems


def expected_requests(result: Mapping[str, Any]) -> list[frozenset[int]]:
    """The removal sets the searcher asked a private scorer for, in order: the charged prior's
    singles, then every set of its trace (the trace holds each distinct set once, in order)."""
    n = result["n_layers"]
    singles = [frozenset([i]) for i in range(n)] if result["cost"]["prior_evaluations"] else []
    return singles + [frozenset(s) for s, _ in result["trace"]]


def check_cost(result: Mapping[str, Any], grid: Grid, cell: Cell) -> list[str]:
    """The cost is what the searcher predicts and what a replay of its trace counts."""
    problems = []
    cost, n = result["cost"], result["n_layers"]
    searcher = get_searcher(cell.search, **grid.searcher_params.get(cell.search, {}))
    bounds = searcher.evaluation_bounds(n, cell.budget)  # the searcher's own rule, as planning reads it
    if bounds.exact and cost["evaluations"] != bounds.low:
        problems.append(f"{cost['evaluations']} evaluations, {cell.search} predicts exactly {bounds.low}")
    elif not bounds.low <= cost["evaluations"] <= bounds.high:
        problems.append(f"{cost['evaluations']} evaluations, outside {cell.search}'s bounds "
                        f"{bounds.low}..{bounds.high}")
    if bounds.energy:  # cbo's gate-gradient passes sit between requests; the trace cannot place them
        return problems
    losses = {frozenset([i]): x for i, x in enumerate(result["prior"]) if x is not None}
    losses.update({frozenset(s): loss for s, loss in result["trace"]})
    replay = replay_cost(expected_requests(result), losses, n)
    if (replay.evaluations, replay.layer_forwards) != (cost["evaluations"], cost["layer_forwards"]):
        problems.append(f"cost {cost['evaluations']} evaluations / {cost['layer_forwards']} layer-forwards, "
                        f"a replay of the trace counts {replay.evaluations} / {replay.layer_forwards}")
    return problems


def _check_evaluation(result: Mapping[str, Any], grid: Grid, eval_items: dict[str, int]) -> list[str]:
    if not result["evaluated"]:
        return ["the cell was not evaluated"]
    from depthprune.data.profiles import PAPER

    cfg = grid.eval_config(PAPER)
    metrics, proto = result["metrics"], result["evaluation_protocol"]
    names = list(PPL_METRICS) + [f"{t}_acc" for t in cfg.tasks] + [f"{t}_acc_norm" for t in cfg.tasks
                                                                   if t in ACC_NORM_TASKS]
    problems = [f"metric {m} missing" for m in names if m not in metrics]
    for name, value in metrics.items():
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            problems.append(f"metric {name} = {value!r}")
        elif "_acc" in name and not name.endswith("_stderr") and not 0 <= value <= 1:
            problems.append(f"metric {name} = {value} outside [0, 1]")
        elif name.endswith("_ppl") and value < 1:
            problems.append(f"metric {name} = {value} < 1")
    ppl = proto.get("perplexity", {})
    c4 = ppl.get("c4", {})
    if c4.get("n_samples") != cfg.c4_windows or c4.get("predicted_tokens") != cfg.c4_windows * (cfg.seq_len - 1):
        problems.append(f"C4 evaluation: {c4.get('n_samples')} windows / {c4.get('predicted_tokens')} predicted "
                        f"tokens, expected {cfg.c4_windows} x {cfg.seq_len} ({cfg.c4_windows * (cfg.seq_len - 1)})")
    wiki = ppl.get("wikitext2", {})
    if not wiki.get("n_samples") or wiki.get("seq_len") != cfg.seq_len:
        problems.append(f"WikiText-2 evaluation: {wiki.get('n_samples')} windows of {wiki.get('seq_len')}")
    tasks = proto.get("zero_shot", {}).get("tasks", {})
    for lm_name, n_items in eval_items.items():
        want = n_items if cfg.limit is None else min(n_items, int(cfg.limit))
        got = (tasks.get(lm_name) or {}).get("n_samples") or {}
        if got.get("effective") != want:
            problems.append(f"lm-eval {lm_name}: {got} items evaluated, expected {want}")
    return problems


def check_tokenizer(session) -> list[str]:
    """The tokenizer and the model agree on the special ids and on the id range, and a pad token
    exists (LLaMA-3 ships none; :func:`depthprune.model.loading.load_model` supplies one)."""
    tok, cfg = session.tokenizer, session.model.config
    problems = []
    eos = cfg.eos_token_id if isinstance(cfg.eos_token_id, list) else [cfg.eos_token_id]
    if tok.eos_token_id not in eos:
        problems.append(f"tokenizer eos id {tok.eos_token_id} is not the model's {cfg.eos_token_id}")
    if tok.bos_token is not None and tok.bos_token_id != cfg.bos_token_id:
        problems.append(f"tokenizer bos id {tok.bos_token_id} is not the model's {cfg.bos_token_id}")
    if tok.pad_token_id is None:
        problems.append("no pad token after load_model")
    if len(tok) > cfg.vocab_size:
        problems.append(f"tokenizer has {len(tok)} ids, the embedding {cfg.vocab_size} rows")
    ids = tok("the correct answer is answer1")["input_ids"]
    if tok.bos_token is not None and ids[0] != tok.bos_token_id:
        problems.append(f"encoding starts with {ids[0]}, not the BOS {tok.bos_token_id} the tokenizer names")
    return problems


def check_saved_checkpoint(session, result: dict[str, Any], out: str | Path, probe_tokens: int = 64) -> list[str]:
    """Save the cell's pruned model the way ``depthprune prune --save`` does, reload it with plain
    transformers, and compare: L - M layers, the original's architecture features, the stand-in
    marker, and logits identical to the in-memory view of the same removal (on a copy: the
    session's own model is left as it is)."""
    import torch
    from transformers import AutoModelForCausalLM

    from depthprune.model.masking import skip_layers
    from depthprune.recipe import save_pruned

    removed = result["removed"]
    ids = torch.tensor([list(range(10, 10 + probe_tokens))])
    with torch.no_grad(), skip_layers(session.model, removed):
        viewed = session.model(input_ids=ids, use_cache=False).logits
    twin = dataclasses.replace(session, model=copy.deepcopy(session.model), _calibrations={})
    out = save_pruned(twin, result, out)
    reloaded = AutoModelForCausalLM.from_pretrained(out, dtype=session.model.dtype).eval()
    problems = []
    n_kept = result["n_layers"] - len(removed)
    cfg, orig = reloaded.config, session.model.config
    if cfg.num_hidden_layers != n_kept or len(reloaded.model.layers) != n_kept:
        problems.append(f"reloaded {cfg.num_hidden_layers} layers ({len(reloaded.model.layers)} modules), "
                        f"expected {n_kept}")
    for key in ("vocab_size", "num_attention_heads", "num_key_value_heads", "tie_word_embeddings", "head_dim",
                "max_position_embeddings"):
        if getattr(cfg, key, None) != getattr(orig, key, None):
            problems.append(f"reloaded config {key} = {getattr(cfg, key, None)!r}, original {getattr(orig, key, None)!r}")
    if _rope(cfg) != _rope(orig):
        problems.append(f"reloaded rope {_rope(cfg)} != original {_rope(orig)}")
    if type(reloaded).__name__ != type(session.model).__name__:
        problems.append(f"reloaded as {type(reloaded).__name__}, original {type(session.model).__name__}")
    if getattr(cfg, "layer_types", None) is not None and len(cfg.layer_types) != n_kept:
        problems.append(f"reloaded layer_types has {len(cfg.layer_types)} entries for {n_kept} layers")
    if session.stand_in and not is_stand_in(out):
        problems.append(f"the pruned stand-in was saved without {STAND_IN_MARKER}: it would pass for a real checkpoint")
    with torch.no_grad():
        got = reloaded(input_ids=ids, use_cache=False).logits
    if not torch.equal(got, viewed):
        problems.append(f"reloaded logits differ from the view's (max |diff| {(got - viewed).abs().max().item():.3g})")
    return problems


def _rope(config) -> dict[str, Any]:
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    return {k: v for k, v in dict(params).items() if k in ("rope_type", "factor", "rope_theta", "low_freq_factor",
                                                             "high_freq_factor", "original_max_position_embeddings")}
