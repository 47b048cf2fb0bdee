"""The long per-condition tables of a grid, for its page under ``reports/`` (REPORT.md links them).

One condition is (grid, model, objective, budget), and a grid has a dozen: their tables are the
evidence behind the verdicts, but a reader of REPORT.md needs the verdicts first, so each grid's
tables live on a page of their own. Every accuracy here carries its 95% interval
(:mod:`depthprune.report.intervals`); differences between two solutions carry the paired one.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthprune.report import analysis, intervals
from depthprune.report.cells import fmt as _f
from depthprune.report.cells import layers as _layers
from depthprune.report.cells import table as _fit
from depthprune.results.schema import Result

PPL_SHORT = {"wikitext2": "wiki2"}
TASK_SHORT = {"hellaswag": "HS", "winogrande": "WG", "arc_easy": "ARC-e", "arc_challenge": "ARC-c",
              "piqa": "PIQA", "boolq": "BoolQ"}


def _table(rows: list[list[Any]], headers: list[str], keys: int = 1) -> str:
    """A table at most 160 wide: split by columns (the first ``keys`` repeated) where wider."""
    return _fit(rows, headers, keys)


def profile_of(rows: Sequence[Result]):
    from depthprune.data.profiles import get_profile

    return get_profile(rows[0].identity.profile or "paper")


def task_label(task: str, metric: str) -> str:
    return f"{TASK_SHORT.get(task, task)} ({'n' if metric == 'acc_norm' else 'a'})"


def evaluated_tasks(rows: list[Result], prof) -> list[str]:
    """The tasks these results' avg_acc averaged (in the profile's order); the profile's default ones
    where the results do not say."""
    named = {t for r in rows for t in ((r.get("evaluation_protocol") or {}).get("zero_shot") or {})
             .get("headline_metric", {})}
    named |= {t for r in rows for t in prof.tasks if f"{t}_{prof.headline_metric(t)}" in (r.get("metrics") or {})}
    return [t for t in prof.tasks if t in named] or list(prof.default_tasks or prof.tasks)


def accuracy_cell(result: Mapping[str, Any], tasks: Sequence[str], headline, value: float | None) -> str:
    """An accuracy in points with its 95% interval; the bare value where no per-item outcomes exist."""
    if value is None:
        return "–"
    iv = intervals.accuracy(result, tasks, headline, value)
    return iv.points() if iv is not None else f"{100 * value:.1f} [–]"


def condition_tables(rows: list[Result], dense: dict[str, Any] | None) -> list[str]:
    """One condition's solutions (and the dense model) in two tables: the set, its losses, perplexities
    and cost; then its accuracies with their 95% intervals, the average first, then one column per
    evaluated task (split by columns where it would be wider than 160)."""
    prof = profile_of(rows)
    tasks = [(t, prof.headline_metric(t)) for t in evaluated_tasks(rows, prof)]
    heads = dict(tasks)
    ppl = [n for n in ("wikitext2", "c4") if any(f"{n}_ppl" in r["metrics"] for r in rows)] or ["wikitext2", "c4"]
    models: list[tuple[str, dict[str, Any], Mapping[str, Any]]] = []  # (label, metrics, result with outcomes)
    first, second = [], []
    if dense is not None and dense.get("metrics"):
        m = dense["metrics"]
        obj = dense.get("objectives", {}).get(rows[0].identity.objective, {})
        first.append(["dense", "–", _f(obj.get("dense_calibration_loss"), 4), "–",
                      *[_f(m.get(f"{n}_ppl"), 2) for n in ppl], _f(m.get("lambada_ppl"), 2), "–", "–", "–"])
        models.append(("dense", m, dense))
    for r in rows:
        m = r["metrics"]
        first.append([r.identity.search, _layers(r["removed"]), _f(r["calibration_loss"], 4),
                      _f(r["calibration_loss"] - r["dense_calibration_loss"], 4),
                      *[_f(m.get(f"{n}_ppl"), 2) for n in ppl], _f(m.get("lambada_ppl"), 2),
                      r["cost"]["evaluations"], r["cost"]["layer_forwards"], _f(r["cost"]["search_seconds"], 1)])
        models.append((r.identity.search, m, r))
    for label, m, source in models:
        second.append([label, accuracy_cell(source, list(heads), heads.get, m.get("avg_acc")),
                       accuracy_cell(source, ["lambada"], lambda _t: "acc", m.get("lambada_acc")),
                       *[accuracy_cell(source, [t], heads.get, m.get(f"{t}_{h}")) for t, h in tasks]])
    return [_table(first, ["searcher", "removed", "calib loss", "Δ dense",
                           *[f"{PPL_SHORT.get(n, n)} ppl" for n in ppl], "lambada ppl", "evals", "layer-fwd",
                           "search s"]),
            "",
            # avg acc (what the verdicts use) first: beside the searcher, also when the table splits
            _table(second, ["searcher", "avg acc", "lambada acc", *[task_label(t, h) for t, h in tasks]])]


def metrics_note(results: list[Result]) -> list[str]:
    """What each profile's columns mean (the real profile's "c4" is its own held-out text)."""
    from depthprune.data.profiles import get_profile

    lines = []
    for name in sorted({r.identity.profile or "paper" for r in results}):
        prof = get_profile(name)
        mine = [r for r in results if (r.identity.profile or "paper") == name]
        heads = ", ".join(f"{t} {prof.headline_metric(t)}" for t in evaluated_tasks(mine, prof))
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


def results_section(results: list[Result], conds, dense: dict[tuple[str, str], dict[str, Any]]) -> list[str]:
    """Every condition's tables, with what the columns mean."""
    lines = ["Accuracies in %, headline metric per task (n = acc_norm, a = acc), each with its 95% interval "
             f"(cluster bootstrap over the result's own items, {intervals.N_RESAMPLES} resamples, seed {intervals.SEED}; [–]: no per-item "
             "outcomes stored, so no interval); avg acc = "
             "mean of the profile's headline tasks (below). Costs are counted as if the searcher ran alone (result "
             "schema 2): evaluations of distinct sets and layer-forwards (one block over the whole calibration set = "
             "1), the dense pass and the single-layer prior included for every searcher that uses the prior; search "
             "seconds likewise (sets another search of the condition had scored are charged their measured time).",
             "", *metrics_note(results), ""]
    for (grid, model, objective, budget), rows in conds.items():
        lines += [f"### {model} · {objective} · M={budget} ({grid} grid, {rows[0]['n_layers']} layers)", "",
                  *condition_tables(rows, dense.get((grid, model))), ""]
    return lines


def spearman_section(conds) -> list[str]:
    rows = []
    for (grid, model, objective, budget), rs in conds.items():
        c = analysis.alignment(rs)
        if c is None:
            continue
        rows.append([grid, model, objective, budget, _f(c.rho, 2), _f(c.p_value, 3),
                     f"[{_f(c.ci_low, 2)}, {_f(c.ci_high, 2)}]", c.n, c.distinct, _short_note(c.note)])
    if not rows:
        return ["No condition has three or more solutions with accuracies."]
    return [
        "ρ = Spearman(−calibration loss, average zero-shot accuracy) across the searchers' solutions of a "
        "condition, uncorrected for evaluation noise (claim 5.3 corrects it, on its own axis); positive = the "
        "better-calibrated solution is also the more accurate one. p-value from scipy's spearmanr; 95% interval "
        f"from a paired percentile bootstrap (1000 resamples, seed 0). With fewer than {analysis.MIN_DISTINCT_FOR_SPEARMAN} "
        "distinct solutions the number means little, and the note says *too few*; *undefined*: every solution has "
        "the same loss or the same accuracy, so there is no ρ. The interval is \"–\" where resampling "
        "is degenerate: a resample whose losses or accuracies are all equal has no ρ, and scipy then reports no "
        "interval (usual with few distinct solutions).",
        "",
        _table(rows, ["grid", "model", "objective", "M", "ρ", "p", "95% CI", "n", "distinct", "note"], keys=4),
    ]


def _short_note(note: str) -> str:
    """A Spearman row's note in a word or two; the section's text says what each means."""
    if note.startswith("only "):
        return "too few"
    if note.startswith("undefined"):
        return "undefined"
    return note


def overlap_section(conds) -> list[str]:
    lines = ["Mean pairwise Jaccard overlap of removed sets across searchers (within an objective), and "
             "Jaccard between each pair of objectives' sets for the same searcher.", ""]
    within = []
    for (grid, model, objective, budget), rs in conds.items():
        within.append([grid, model, objective, budget, len(rs),
                       _f(analysis.mean_pairwise_jaccard([r["removed"] for r in rs]), 2),
                       _f(sum(analysis.contiguity(r["removed"]) for r in rs) / len(rs), 2),
                       _f(sum(analysis.relative_depth(r["removed"], r["n_layers"]) for r in rs) / len(rs), 2)])
    lines.append(_table(within, ["grid", "model", "objective", "M", "searchers", "mean Jaccard", "contiguity",
                                 "mean depth"]))
    pairs: dict[tuple[str, str, int], dict[str, dict[str, list[int]]]] = defaultdict(lambda: defaultdict(dict))
    for (grid, model, objective, budget), rs in conds.items():
        for r in rs:
            pairs[(grid, model, budget)][r.identity.search][objective] = r["removed"]
    across = []
    for (grid, model, budget), by_search in sorted(pairs.items()):
        for search, objs in sorted(by_search.items(), key=lambda kv: analysis.searcher_rank(kv[0])):
            for a, b in itertools.combinations(sorted(objs), 2):  # every pair of objectives present
                across.append([grid, model, budget, search, f"{a} / {b}", _layers(objs[a]), _layers(objs[b]),
                               _f(analysis.jaccard(objs[a], objs[b]), 2)])
    if across:
        lines += ["", _table(across, ["grid", "model", "M", "searcher", "objectives", "first removes", "second removes",
                                      "Jaccard"])]
    lines += ["", "contiguity = share of removed layers with a removed neighbour; mean depth = mean position of "
                  "removed layers (0 = first block, 1 = last)."]
    return lines


@dataclass(frozen=True)
class NoiseTally:
    """Each searcher's solution against oneshot's: the table's rows, how many differ, how many beyond noise."""

    rows: list[list[Any]]
    judged: int
    beyond: int


def noise_tally(conds) -> NoiseTally:
    """Avg-acc difference of every solution from oneshot's over the same items, with its paired interval."""
    rows, judged, beyond = [], 0, 0
    for (grid, model, objective, budget), rs in conds.items():
        base = next((r for r in rs if r.identity.search == "oneshot" and r.get("item_outcomes")), None)
        if base is None:
            continue
        for r in rs:
            if r is base or not r.get("item_outcomes"):
                continue
            if sorted(r["removed"]) == sorted(base["removed"]):
                rows.append([grid, model, objective, budget, r.identity.search, "same set", "–", "–"])
                continue
            prof = profile_of([r])
            tasks = [t for t in prof.tasks if t in r["item_outcomes"] and t in base["item_outcomes"]]
            d = analysis.paired_difference(r["item_outcomes"], base["item_outcomes"], tasks, prof.headline_metric)
            if d is None:
                continue
            judged += 1
            beyond += d.distinguishable
            rows.append([grid, model, objective, budget, r.identity.search, f"{100 * d.delta:+.1f}",
                         f"[{100 * d.low:+.1f}, {100 * d.high:+.1f}]", "yes" if d.distinguishable else "no"])
    return NoiseTally(rows, judged, beyond)


NOT_MEASURED_NOISE = ("Not measured: no result carries per-item outcomes (results from before schema 2's "
                      "`item_outcomes`).")


def noise_summary(tally: NoiseTally) -> str:
    return (f"{tally.beyond} of {tally.judged} different solutions differ from oneshot's beyond the evaluation's "
            "noise (avg-acc difference over the same items, 95% paired-bootstrap interval excluding 0)")


def noise_section(conds) -> list[str]:
    """Each searcher's solution against oneshot's, judged against the evaluation's own noise."""
    tally = noise_tally(conds)
    if not tally.rows:
        return [NOT_MEASURED_NOISE]
    return [f"Avg-acc difference (points) of each searcher's solution minus oneshot's, over the same items, "
            f"with a 95% paired-bootstrap interval (1000 resamples, seed 0). {noise_summary(tally)}; a single "
            "task's standard error (~3 points at 200–250 items) says nothing about a difference between two models "
            "on the same items.",
            "", _table(tally.rows, ["grid", "model", "objective", "M", "searcher", "Δ avg acc", "95% CI",
                                    "beyond noise"])]
