"""REPORT.md from any set of cell results: tables, correlations, overlaps, figures, claims.

    depthprune report --results results/ [--results other-shard/] --out REPORT.md

Results from several machines or shards merge (a cell found twice keeps the newest).
Everything in the report is computed here from the result files; nothing is typed in.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tabulate import tabulate

from depthprune.grid.results import iter_dense, iter_results
from depthprune.report import analysis as A
from depthprune.report.cells import fmt as _f, layers as _layers, pct as _pct
from depthprune.report.claims import render_claims
from depthprune.report.calibration_curve import find_curves, render_curves
from depthprune.report.controls import is_control, render_controls
from depthprune.report.precision import render_precision

PPL_SHORT = {"wikitext2": "wiki2"}
TASK_SHORT = {"hellaswag": "HS", "winogrande": "WG", "arc_easy": "ARC-e", "arc_challenge": "ARC-c",
              "piqa": "PIQA", "boolq": "BoolQ"}


def _profile(rows: Sequence[dict[str, Any]]):
    from depthprune.profiles import get_profile

    return get_profile(rows[0].get("profile") or "paper")


def _task_label(task: str, metric: str) -> str:
    return f"{TASK_SHORT.get(task, task)} ({'n' if metric == 'acc_norm' else 'a'})"


def _evaluated_tasks(rows: list[dict[str, Any]], prof) -> list[str]:
    """The tasks these results' avg_acc averaged (in the profile's order); the profile's default ones
    where the results do not say."""
    named = {t for r in rows for t in ((r.get("evaluation_protocol") or {}).get("zero_shot") or {})
             .get("headline_metric", {})}
    named |= {t for r in rows for t in prof.tasks if f"{t}_{prof.headline_metric(t)}" in (r.get("metrics") or {})}
    return [t for t in prof.tasks if t in named] or list(prof.default_tasks or prof.tasks)


def condition_table(rows: list[dict[str, Any]], dense: dict[str, Any] | None) -> str:
    """One condition's solutions (and the dense model): the tasks they were evaluated on as columns."""
    prof = _profile(rows)
    tasks = [(t, prof.headline_metric(t)) for t in _evaluated_tasks(rows, prof)]
    ppl = [n for n in ("wikitext2", "c4") if any(f"{n}_ppl" in r["metrics"] for r in rows)] or ["wikitext2", "c4"]
    headers = ["searcher", "removed", "calib loss", "Δ dense", *[f"{PPL_SHORT.get(n, n)} ppl" for n in ppl],
               "lambada ppl", "lambada acc", *[_task_label(t, m) for t, m in tasks], "avg acc", "evals",
               "layer-fwd", "search s"]
    body = []
    if dense is not None and dense.get("metrics"):
        m = dense["metrics"]
        obj = dense.get("objectives", {}).get(rows[0]["objective"], {})
        body.append(["dense", "–", _f(obj.get("dense_calibration_loss"), 4), "–",
                     *[_f(m.get(f"{n}_ppl"), 2) for n in ppl], _f(m.get("lambada_ppl"), 2),
                     _pct(m.get("lambada_acc")), *[_pct(m.get(f"{t}_{h}")) for t, h in tasks],
                     _pct(m.get("avg_acc")), "–", "–", "–"])
    for r in rows:
        m = r["metrics"]
        body.append([
            r["search"], _layers(r["removed"]), _f(r["calibration_loss"], 4),
            _f(r["calibration_loss"] - r["dense_calibration_loss"], 4),
            *[_f(m.get(f"{n}_ppl"), 2) for n in ppl], _f(m.get("lambada_ppl"), 2),
            _pct(m.get("lambada_acc")), *[_pct(m.get(f"{t}_{h}")) for t, h in tasks],
            _pct(m.get("avg_acc")), r["cost"]["evaluations"], r["cost"]["layer_forwards"],
            _f(r["cost"]["search_seconds"], 1),
        ])
    return tabulate(body, headers=headers, tablefmt="github", disable_numparse=True)


def _metrics_note(results: list[dict[str, Any]]) -> list[str]:
    """What each profile's columns mean (the real profile's "c4" is its own held-out text)."""
    from depthprune.profiles import get_profile

    lines = []
    for name in sorted({r.get("profile") or "paper" for r in results}):
        prof = get_profile(name)
        heads = ", ".join(f"{t} {prof.headline_metric(t)}"
                          for t in _evaluated_tasks([r for r in results if (r.get("profile") or "paper") == name], prof))
        lines.append(f"- profile `{name}` ({prof.description}): avg acc = mean of {heads}; c4 ppl on "
                     f"{_source(prof.source('c4_validation').describe())}; wiki2 ppl on "
                     f"{_source(prof.source('wikitext2').describe())}")
    return lines


def _source(d: dict[str, Any]) -> str:
    """A text source in a few words: dataset (config), split, file names (no machine paths)."""
    files = [Path(f).name if d.get("path") == "json" else f for f in (d.get("data_files") or {}).values()]
    where = "/".join(Path(f).parent.name for f in (d.get("data_files") or {}).values()) if d.get("path") == "json" else ""
    name = f"local `{where}/{files[0]}`" if where and files else f"`{d.get('path')}`"
    if d.get("name"):
        name += f" ({d['name']})"
    if files and d.get("path") != "json":
        name += f" `{files[0]}`"
    return f"{name}, split {d.get('split')}"


def _env_summary(results: list[dict[str, Any]]) -> list[str]:
    envs = Counter()
    for r in results:
        e = r.get("environment", {})
        p = e.get("packages", {})
        envs[(e.get("device", "?"), e.get("dtype", "?"), p.get("torch", "?"), p.get("transformers", "?"),
              p.get("lm_eval", "?"), e.get("git_revision", "?"))] += 1
    lines = []
    for (device, dtype, torch_v, tf_v, lm_v, rev), n in envs.most_common():
        lines.append(f"- {n} cells: device `{device}`, dtype `{dtype}`, torch {torch_v}, transformers {tf_v}, "
                     f"lm-eval {lm_v}, depthprune revision `{rev[:12]}`")
    return lines


def _spearman_section(conds) -> list[str]:
    rows = []
    for (grid, model, objective, budget), rs in conds.items():
        c = A.alignment(rs)
        if c is None:
            continue
        rows.append([grid, model, objective, budget, _f(c.rho, 2), _f(c.p_value, 3),
                     f"[{_f(c.ci_low, 2)}, {_f(c.ci_high, 2)}]", c.n, c.distinct, c.note])
    if not rows:
        return ["No condition has three or more solutions with accuracies."]
    return [
        "ρ = Spearman(−calibration loss, average zero-shot accuracy) across the searchers' solutions of a "
        "condition; positive = the better-calibrated solution is also the more accurate one. p-value from "
        f"scipy's spearmanr; 95% interval from a paired percentile bootstrap (1000 resamples, seed 0). "
        f"With fewer than {A.MIN_DISTINCT_FOR_SPEARMAN} distinct solutions the number means little, and the "
        "note says so. The interval is \"–\" where resampling is degenerate: a resample whose losses or "
        "accuracies are all equal has no ρ, and scipy then reports no interval (usual with few distinct solutions).",
        "",
        tabulate(rows, headers=["grid", "model", "objective", "M", "ρ", "p", "95% CI", "n", "distinct", "note"],
                 tablefmt="github", disable_numparse=True),
    ]


def _overlap_section(conds) -> list[str]:
    lines = ["Mean pairwise Jaccard overlap of removed sets across searchers (within an objective), and "
             "Jaccard between each pair of objectives' sets for the same searcher.", ""]
    within = []
    for (grid, model, objective, budget), rs in conds.items():
        within.append([grid, model, objective, budget, len(rs),
                       _f(A.mean_pairwise_jaccard([r["removed"] for r in rs]), 2),
                       _f(sum(A.contiguity(r["removed"]) for r in rs) / len(rs), 2),
                       _f(sum(A.relative_depth(r["removed"], r["n_layers"]) for r in rs) / len(rs), 2)])
    lines.append(tabulate(within, headers=["grid", "model", "objective", "M", "searchers", "mean Jaccard",
                                           "contiguity", "mean depth"], tablefmt="github", disable_numparse=True))
    pairs: dict[tuple[str, str, int], dict[str, dict[str, list[int]]]] = defaultdict(lambda: defaultdict(dict))
    for (grid, model, objective, budget), rs in conds.items():
        for r in rs:
            pairs[(grid, model, budget)][r["search"]][objective] = r["removed"]
    across = []
    for (grid, model, budget), by_search in sorted(pairs.items()):
        for search, objs in sorted(by_search.items(), key=lambda kv: A.searcher_rank(kv[0])):
            for a, b in itertools.combinations(sorted(objs), 2):  # every pair of objectives present
                across.append([grid, model, budget, search, f"{a} / {b}", _layers(objs[a]), _layers(objs[b]),
                               _f(A.jaccard(objs[a], objs[b]), 2)])
    if across:
        lines += ["", tabulate(across, headers=["grid", "model", "M", "searcher", "objectives", "first removes",
                                                "second removes", "Jaccard"], tablefmt="github",
                               disable_numparse=True)]
    lines += ["", "contiguity = share of removed layers with a removed neighbour; mean depth = mean position of "
                  "removed layers (0 = first block, 1 = last)."]
    return lines


def _model_card(model: str) -> dict[str, Any]:
    """The shipped model card of a registry model (tiny family, real models), or {} (paper models)."""
    import json

    from depthprune.models import MODELS, REAL_ASSETS

    spec = MODELS.get(model)
    if spec is None:
        return {}
    for card in (Path(spec.source) / "card.json", REAL_ASSETS / "models" / model / "card.json"):
        if card.is_file():
            return json.loads(card.read_text())
    return {}


def _real_section(results: list[dict[str, Any]], dense: dict[tuple[str, str], dict[str, Any]],
                  figures: list[Path], out: Path) -> list[str]:
    """Grids on a real pretrained model (profile ``real``): what the model is, how the dense model
    does against chance, its single-layer removal profile — one small real model, not the paper's."""
    lines: list[str] = []
    for grid, model in sorted({(r["grid"], r["model"]) for r in results if r.get("profile") == "real"}):
        card = _model_card(model)
        rows = [r for r in results if r["grid"] == grid and r["model"] == model]
        lines += [f"### {model} ({grid} grid)", "",
                  f"**One small real model, not the paper's.** {card.get('what', model)}; "
                  f"{card.get('parameters', '?'):,} parameters, {card.get('layers', rows[0]['n_layers'])} blocks "
                  f"(the paper's models: 8B, 32–36 blocks). Its phenomena are this model's; they neither confirm "
                  "nor refute the paper's numbers, only whether its claims can be seen in a real pretrained "
                  f"network on this grid's small calibration sets. {len(rows)} cells here — searchers "
                  f"{', '.join(sorted({r['search'] for r in rows}, key=A.searcher_rank))}, objectives "
                  f"{', '.join(sorted({r['objective'] for r in rows}))}, M = "
                  f"{', '.join(str(b) for b in sorted({r['budget'] for r in rows}))}; its verdicts above rest on "
                  "these cells only.", ""]
        lines += [f"- {text}" for text in card.get("implications", [])]
        measured = card.get("measured", {}).get("tasks", {}).get("tasks", {})
        d = dense.get((grid, model), {}).get("metrics", {})
        table = []
        for lm_name, m in sorted(measured.items()):
            short = lm_name.removeprefix("real_")
            for metric in ("acc", "acc_norm"):
                if metric in m:
                    table.append([short, metric, _f(m[metric], 3), m.get("n", "?"), _f(d.get(f"{short}_{metric}"), 3),
                                  m.get("chance", "?")])
        if table:
            lines += ["", "Dense model against chance (full task sets from the model card; the grid evaluates a "
                      "slice, its dense figures beside them):", "",
                      tabulate(table, headers=["task", "metric", "dense (card)", "items", "dense (grid slice)",
                                               "chance"], tablefmt="github", disable_numparse=True)]
        for path in figures:
            if path.name == f"single-layer-{grid}-{model}.png":
                rel = path.relative_to(out.parent) if path.is_relative_to(out.parent) else path
                lines += ["", "Single-block removal profile (Δ calibration loss when one block alone is removed; "
                          "the prior every searcher shares):", "", f"![{path.stem}]({rel})"]
        lines.append("")
    return lines


def _protocol_section(results: list[dict[str, Any]]) -> list[str]:
    """Where a grid departs from the paper's protocol, with the measured figures it affects."""
    from depthprune.objectives import make_objective

    lines: list[str] = []
    for grid in sorted({r["grid"] for r in results}):
        rows = [r for r in results if r["grid"] == grid]
        diffs = set()
        for r in rows:
            paper = make_objective(r["objective"], "paper").params()
            for key, value in sorted(r["objective_params"].items()):
                if paper.get(key) != value:
                    diffs.add((r["objective"], key, repr(value), repr(paper.get(key))))
        profiles = sorted({r["profile"] for r in rows})
        if not diffs and profiles == ["paper"]:
            continue
        lines += [f"**{grid} grid** (profile {', '.join(profiles)}): calibration settings that differ from the "
                  "paper's —", ""]
        lines += [f"- `{o}.{k}` = {v} (paper: {pv})" for o, k, v, pv in sorted(diffs)]
        margin = [r for r in rows if r["objective"] == "margin"]
        if any(r["objective_params"].get("answer") == "cloze" for r in margin):
            figures = []
            for model in sorted({r["model"] for r in margin}):
                card = _model_card(model)
                dense = card.get("evaluation", {}).get("dense", {})
                real = card.get("measured", {}).get("margin", {})
                if "label" in real and "cloze" in real:
                    dense = {"margin_label": real["label"], "margin_cloze": real["cloze"]}
                if "margin_label" in dense and "margin_cloze" in dense:
                    figures.append(f"{model} label {dense['margin_label']['mean_margin']:+.3f} "
                                   f"(acc {dense['margin_label']['accuracy']:.3f}) vs cloze "
                                   f"{dense['margin_cloze']['mean_margin']:+.3f} "
                                   f"(acc {dense['margin_cloze']['accuracy']:.3f})")
            lines += ["", "- The margin is scored in **cloze** form (options not shown), not the paper's label form: "
                      "the dense models here are at chance with listed options. Dense mean margin (model cards, "
                      "128 items): " + ("; ".join(figures) if figures else "not in the model cards") + "."]
        if margin:
            better = [r for r in margin if r["calibration_loss"] < r["dense_calibration_loss"]]
            gains = [r["dense_calibration_loss"] - r["calibration_loss"] for r in better]
            lines += [f"- {len(better)} of {len(margin)} margin cells find a pruned model with a *better* margin "
                      "than the dense model" + (f" (loss lower by {min(gains):.3f}–{max(gains):.3f})" if gains
                                                else "") + ": on these models removing blocks can sharpen the "
                      "cloze preference, so 'margin loss increase' is not a damage measure here."]
        lines.append("")
    return lines or ["Every grid here follows the paper's protocol."]


def _noise_section(conds) -> list[str]:
    """Each searcher's solution against oneshot's, judged against the evaluation's own noise."""
    rows, judged, beyond = [], 0, 0
    for (grid, model, objective, budget), rs in conds.items():
        base = next((r for r in rs if r["search"] == "oneshot" and r.get("item_outcomes")), None)
        if base is None:
            continue
        for r in rs:
            if r is base or not r.get("item_outcomes"):
                continue
            if sorted(r["removed"]) == sorted(base["removed"]):
                rows.append([grid, model, objective, budget, r["search"], "same set", "–", "–"])
                continue
            prof = _profile([r])
            tasks = [t for t in prof.tasks if t in r["item_outcomes"] and t in base["item_outcomes"]]
            d = A.paired_difference(r["item_outcomes"], base["item_outcomes"], tasks, prof.headline_metric)
            if d is None:
                continue
            judged += 1
            beyond += d.distinguishable
            rows.append([grid, model, objective, budget, r["search"], f"{100 * d.delta:+.1f}",
                         f"[{100 * d.low:+.1f}, {100 * d.high:+.1f}]", "yes" if d.distinguishable else "no"])
    if not rows:
        return ["Not measured: no result carries per-item outcomes (results from before schema 2's "
                "`item_outcomes`)."]
    return [f"Avg-acc difference (points) of each searcher's solution minus oneshot's, over the same items, "
            f"with a 95% paired-bootstrap interval (1000 resamples, seed 0). {beyond} of {judged} different "
            "solutions differ from oneshot's beyond the evaluation's noise; a single task's standard error "
            "(~3 points at 200–250 items) says nothing about a difference between two models on the same items.",
            "", tabulate(rows, headers=["grid", "model", "objective", "M", "searcher", "Δ avg acc", "95% CI",
                                        "beyond noise"], tablefmt="github", disable_numparse=True)]


def _variance_section(conds) -> list[str]:
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    for (grid, model, objective, budget), rs in conds.items():
        groups[(grid, model, budget)].extend(rs)
    rows = []
    for (grid, model, budget), rs in sorted(groups.items()):
        for metric, label, transform in (("c4_ppl", "log C4 perplexity", math.log),
                                         ("avg_acc", "avg accuracy", lambda v: v)):
            vs = A.variance_shares(rs, metric, transform)
            if vs is not None:
                rows.append([grid, model, budget, label, _f(vs.objective, 2), _f(vs.searcher, 2),
                             _f(vs.residual, 2), vs.n])
    if not rows:
        return ["Needs both objectives and at least two common searchers in a condition."]
    return ["Share of variance across the (objective × searcher) solutions of a model and budget explained by "
            "the objective and by the searcher (two-way decomposition without replication; the remainder is "
            "their interaction). Perplexity is the evaluated C4 perplexity, comparable across objectives.", "",
            tabulate(rows, headers=["grid", "model", "M", "metric", "objective", "searcher", "interaction", "n"],
                     tablefmt="github", disable_numparse=True)]


def write_report(results_dirs: Iterable[str | Path], out: str | Path = "REPORT.md",
                 figures_dir: str | Path | None = None, command: str = "depthprune report",
                 reference_dir: str | Path = "reference") -> Path:
    dirs = [Path(d) for d in results_dirs]
    every = [r for r in iter_results(dirs) if r.get("grid_kind") != "slice"]  # slices: cheaper repeats, for CI only
    results = [r for r in every if not is_control(r)]  # controls are reported in their own sections
    dense = {(d["grid"], d["model"]): d for d in iter_dense(dirs)}
    out = Path(out)
    figures = Path(figures_dir) if figures_dir is not None else out.parent / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    conds = A.by_condition(results)
    grids = sorted({r["grid"] for r in results})
    lines = [
        "# depthprune report",
        "",
        "Generated by the reporter from the cell result files; do not edit by hand. Regenerate with:",
        "",
        "```bash",
        command,
        "```",
        "",
        f"{len(every)} cell results from {', '.join(f'`{d}`' for d in dirs)}; grids: "
        f"{', '.join(grids) or 'none'}" + (f"; controls: {', '.join(sorted({r['grid'] for r in every if is_control(r)}))}"
                                          if len(every) > len(results) else "") + ".",
        "",
    ]
    lines += ["## The paper's claims (its own text, v2), per grid", "", *render_claims(results), ""]
    if "paper" not in grids:
        lines += [
            "## Paper grid (llama3-8b, llama3.1-8b, qwen3-8b)",
            "",
            "**Not run here**: this machine has no GPU and no access to the weights. The verdicts above are "
            f"measured on the {' and '.join(grids) or 'no'} grid{'s' if len(grids) > 1 else ''} only. To run the paper grid on a GPU runner with the weights in the "
            "Hugging Face cache (or `DEPTHPRUNE_MODELS_DIR`) and the datasets reachable:",
            "",
            "```bash",
            "DEPTHPRUNE_TORCH=torch tox -e full-grid            # or, in an environment with depthprune[all]:",
            "pytest bench --grid paper -n $(nvidia-smi -L | wc -l) --dist loadgroup --results results/",
            "depthprune report --results results/ --out REPORT.md",
            "```",
            "",
            "On a SLURM cluster, one task per model: `depthprune submit --grid paper --executor slurm "
            "--partition <p> --wait --report REPORT.md` (or one job per model: `pytest bench --grid paper "
            "--model <id> --results results-<id>/`, then `depthprune report --results results-*/`).",
            "",
        ]
    figure_paths = figures_for(conds, figures, grids, dense)
    real = _real_section(results, dense, figure_paths, out)
    if real:
        lines += ["## A real pretrained model on CPU", "", *real]
    curves = render_curves(find_curves(dirs))
    if curves:
        lines += ["## Calibration-size curve", "", *curves]
    lines += ["## Where a grid departs from the paper's protocol", "", *_protocol_section(results), ""]
    lines += ["## Results per model, objective and budget", "",
              "Accuracies in %, headline metric per task (n = acc_norm, a = acc); avg acc = mean of the "
              "profile's headline tasks (below). Costs are counted as if the searcher ran alone (result schema "
              "2): evaluations of distinct sets and layer-forwards (one block over the whole calibration set = "
              "1), the dense pass and the single-layer prior included for every searcher that uses the prior; "
              "search seconds likewise (sets another search of the condition had scored are charged their "
              "measured time).", "", *_metrics_note(results), ""]
    for (grid, model, objective, budget), rows in conds.items():
        n_layers = rows[0]["n_layers"]
        lines += [f"### {model} · {objective} · M={budget} ({grid} grid, {n_layers} layers)", "",
                  condition_table(rows, dense.get((grid, model))), ""]
    controls = render_controls(every)
    if controls:
        lines += ["## Controls: what the paper could not vary", "", *controls]
    precision = render_precision(every, reference_dir)
    if precision:
        lines += ["## Precision control: bf16 against float32", "", *precision]
    lines += ["## Calibration loss vs accuracy (Spearman)", "", *_spearman_section(conds), ""]
    lines += ["## Overlap of removed sets", "", *_overlap_section(conds), ""]
    lines += ["## Objective vs searcher: shares of variance", "", *_variance_section(conds), ""]
    lines += ["## Accuracy differences against evaluation noise", "", *_noise_section(conds), ""]
    lines += ["## Figures", ""]
    for path in figure_paths:
        lines.append(f"![{path.stem}]({path.relative_to(out.parent) if path.is_relative_to(out.parent) else path})")
    lines += ["", "## Environment", "", "Cells by the environment that produced them:", "",
              *_env_summary(results), ""]
    out.write_text("\n".join(lines))
    return out


def figures_for(conds, figures: Path, grids: list[str], dense: dict | None = None) -> list[Path]:
    from depthprune.report.figures import cost_quality, removal_heatmaps, single_layer_profiles

    paths = removal_heatmaps(conds, figures)
    paths += single_layer_profiles({k: v for k, v in (dense or {}).items() if k[0] in grids}, figures)
    for grid in grids:
        p = cost_quality(conds, figures, grid)
        if p is not None:
            paths.append(p)
    return paths
