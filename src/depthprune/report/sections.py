"""REPORT.md's sections, in order: each a function of the :class:`depthprune.report.sections.Inputs`
that :func:`depthprune.report.write_report` computes once (results, verdicts, pages and their links), so a
section is one readable function and the report's order is the list :data:`depthprune.report.sections.SECTIONS`.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from depthprune.builders.task_baselines import FROZEN as TASK_BASELINES
from depthprune.builders.task_baselines import chance as task_chance
from depthprune.common.jsonio import read_json
from depthprune.common.text_tables import markdown_table
from depthprune.report import analysis, claims, intervals, tables
from depthprune.report import firmness as report_firmness
from depthprune.report import healing as report_healing
from depthprune.report import speed as report_speed
from depthprune.report import verdicts as report_verdicts
from depthprune.report.baselines import BASELINES, render_baselines
from depthprune.report.calibration_curve import find_curves, render_curves
from depthprune.report.cells import fmt as _f
from depthprune.report.cells import table as _fit_table
from depthprune.report.claims import Verdict
from depthprune.report.grids import DeclaredGrid
from depthprune.report.variance import share_rows
from depthprune.results.schema import Result


def link(target: Path, base: Path) -> str:
    """``target`` relative to the directory ``base``, as a markdown link target."""
    return Path(os.path.relpath(target.resolve(), base.resolve())).as_posix()


def env_summary(results: list[Result]) -> list[str]:
    envs: Counter[tuple[str, ...]] = Counter()
    for r in results:
        e = r.get("environment", {})
        p = e.get("packages", {})
        envs[(e.get("device", "?"), e.get("dtype", "?"), p.get("torch", "?"), p.get("transformers", "?"),
              p.get("lm_eval", "?"), e.get("git_revision", "?"))] += 1
    lines = []
    for (device, dtype, torch_v, tf_v, lm_v, rev), n in envs.most_common():
        dirty = "+dirty" if rev.endswith("+dirty") else ""
        lines.append(f"- {n} cells: device `{device}`, dtype `{dtype}`, torch {torch_v}, transformers {tf_v}, "
                     f"lm-eval {lm_v}, depthprune revision `{rev[:12]}{dirty}`")
    if any(rev.endswith("+dirty") for *_, rev in envs):
        lines += ["", "(+dirty: the checkout had uncommitted changes to tracked files when the cell ran. Before "
                  "depthprune's git_revision looked only at its own package, a grid run with --update-reference "
                  "could mark its cells so, by writing the run's own reference files into the checkout.)"]
    return lines


def _model_card(model: str) -> dict[str, Any]:
    """The shipped model card of a registry model (tiny family, real models), or {} (paper models)."""
    from depthprune.model.registry import MODELS, REAL_ASSETS

    spec = MODELS.get(model)
    if spec is None:
        return {}
    for card in (Path(spec.source) / "card.json", REAL_ASSETS / "models" / model / "card.json"):
        if card.is_file():
            return read_json(card)
    return {}


def real_section(results: list[Result], dense: dict[tuple[str, str], dict[str, Any]],
                  figures: list[Path], out: Path) -> list[str]:
    """Grids on a real pretrained model (profile ``real``): what the model is, how the dense model
    does against chance, its single-layer removal profile — one small real model, not the paper's."""
    lines: list[str] = []
    chances = _frozen_chances()
    for grid, model in sorted({(r.identity.grid, r.identity.model) for r in results if r.identity.profile == "real"}):
        card = _model_card(model)
        rows = [r for r in results if r.identity.grid == grid and r.identity.model == model]
        lines += [f"### {model} ({grid} grid)", "",
                  f"**One small real model, not the paper's.** {card.get('what', model)}; "
                  f"{card.get('parameters', '?'):,} parameters, {card.get('layers', rows[0]['n_layers'])} blocks "
                  f"(the paper's models: 8B, 32–36 blocks). Its phenomena are this model's; they neither confirm "
                  "nor refute the paper's numbers, only whether its claims can be seen in a real pretrained "
                  f"network at this grid's calibration and evaluation sizes. {len(rows)} cells here — searchers "
                  f"{', '.join(sorted({r.identity.search for r in rows}, key=analysis.searcher_rank))}, objectives "
                  f"{', '.join(sorted({r.identity.objective for r in rows}))}, M = "
                  f"{', '.join(str(b) for b in sorted({r.identity.budget for r in rows}))}; its verdicts above rest on "
                  "these cells only.", ""]
        lines += [f"- {text}" for text in card.get("implications", [])]
        measured = card.get("measured", {}).get("tasks", {}).get("tasks", {})
        record = dense.get((str(grid), model), {})
        d = record.get("metrics", {})
        table = []
        card_tasks = {lm_name.removeprefix("real_"): m for lm_name, m in measured.items()}
        graded = _evaluated_tasks(d)  # the grid's own tasks first: they are what its verdicts read
        for short in [*graded, *sorted(set(card_tasks) - set(graded))]:
            m = card_tasks.get(short, {})
            for metric in ("acc", "acc_norm"):
                if metric in m or f"{short}_{metric}" in d:
                    n = m.get("n")
                    on_card = ("–" if metric not in m else intervals.wilson(m[metric], n).points()
                               if isinstance(n, int) and n > 0 else _f(m[metric], 3))
                    sliced = tables.accuracy_cell(record, [short], lambda _t, k=metric: k, d.get(f"{short}_{metric}"))
                    table.append([short, metric, on_card, n if n is not None else "–", sliced,
                                  m.get("chance", chances.get(f"real_{short}", "?"))])
        if table:
            lines += ["", "Dense model against chance, accuracies in % with 95% intervals (full task sets from the "
                      "model card, Wilson; the grid evaluates a slice, its dense figures beside them, cluster "
                      "bootstrap):", "",
                      _fit_table(table, ["task", "metric", "dense (card)", "items", "dense (grid slice)", "chance"],
                                keys=2)]
        for path in figures:
            if path.name == f"single-layer-{grid}-{model}.png":
                lines += ["", "Single-block removal profile (Δ calibration loss when one block alone is removed; "
                          "the prior every searcher shares):", "", f"![{path.stem}]({link(path, out.parent)})"]
        lines.append("")
    return lines


def _evaluated_tasks(metrics: dict[str, Any]) -> list[str]:
    """The tasks a dense record's metrics were evaluated on (``<task>_acc`` / ``<task>_acc_norm``)."""
    tasks = {k.removesuffix("_acc_norm") if k.endswith("_acc_norm") else k.removesuffix("_acc")
             for k in metrics if k.endswith(("_acc", "_acc_norm"))}
    return sorted(tasks - {"avg", "lambada"})


def _frozen_chances() -> dict[str, float]:
    """lm-eval task -> chance, from the frozen baselines (the WordNet builder's and every other task's)."""
    out: dict[str, float] = {}
    for path, readers_of in ((BASELINES, lambda entry: entry), (TASK_BASELINES, lambda entry: entry["readers"])):
        if path.is_file():
            for name, entry in read_json(path)["tasks"].items():
                out.setdefault(name, round(task_chance(readers_of(entry)), 3))
    return out


def protocol_section(results: list[Result]) -> list[str]:
    """Where a grid departs from the paper's protocol, with the measured figures it affects."""
    from depthprune.objectives import make_objective

    lines: list[str] = []
    for grid in analysis.grids_of(results):
        rows = [r for r in results if r.identity.grid == grid]
        diffs = set()
        for r in rows:
            paper = make_objective(r.identity.objective, "paper").params()
            for key, value in sorted(r["objective_params"].items()):
                if paper.get(key) != value:
                    diffs.add((r.identity.objective, key, repr(value), repr(paper.get(key))))
        profiles = sorted({r.identity.profile for r in rows})
        if not diffs and profiles == ["paper"]:
            continue
        lines += [f"**{grid} grid** (profile {', '.join(profiles)}): calibration settings that differ from the "
                  "paper's —", ""]
        lines += [f"- `{o}.{k}` = {v} (paper: {pv})" for o, k, v, pv in sorted(diffs)]
        margin = [r for r in rows if r.identity.objective == "margin"]
        if any(r["objective_params"].get("answer") == "cloze" for r in margin):
            figures = []
            for model in sorted({r.identity.model for r in margin}):
                card = _model_card(model)
                dense = card.get("evaluation", {}).get("dense", {})
                real = card.get("measured", {}).get("margin", {})
                if "label" in real and "cloze" in real:
                    dense = {"margin_label": real["label"], "margin_cloze": real["cloze"]}
                if "margin_label" in dense and "margin_cloze" in dense:
                    figures.append(f"{model} label {dense['margin_label']['mean_margin']:+.3f} "
                                   f"(acc {_card_accuracy(dense['margin_label'])}) vs cloze "
                                   f"{dense['margin_cloze']['mean_margin']:+.3f} "
                                   f"(acc {_card_accuracy(dense['margin_cloze'])})")
            lines += ["", "- The margin is scored in **cloze** form (options not shown), not the paper's label form: "
                      "the dense models here are at chance with listed options. Dense mean margin and accuracy "
                      "(model cards; accuracy in % with its 95% Wilson interval on the card's items): "
                      + ("; ".join(figures) if figures else "not in the model cards") + "."]
        if margin:
            better = [r for r in margin if r["calibration_loss"] < r["dense_calibration_loss"]]
            gains = [r["dense_calibration_loss"] - r["calibration_loss"] for r in better]
            lines += [f"- {len(better)} of {len(margin)} margin cells find a pruned model with a *better* margin "
                      "than the dense model" + (f" (loss lower by {min(gains):.3f}–{max(gains):.3f})" if gains
                                                else "") + ": on these models removing blocks can sharpen the "
                      "cloze preference, so 'margin loss increase' is not a damage measure here."]
        lines.append("")
    return lines or ["Every grid here follows the paper's protocol."]


def _card_accuracy(entry: dict[str, Any]) -> str:
    """A model card's margin accuracy with its Wilson interval (on the card's own item count)."""
    n = (entry.get("protocol") or {}).get("n_items") or (entry.get("objective") or {}).get("n_items")
    return intervals.wilson(entry["accuracy"], n).points() if n else f"{100 * entry['accuracy']:.1f} [–]"


def variance_section(results: list[Result]) -> list[str]:
    rows = share_rows(results)
    if not rows:
        return ["Needs both objectives and at least three common searchers in a condition."]

    def shares(s) -> list[str]:
        return ["–"] * 4 if s is None else [_f(s.objective, 2), _f(s.searcher, 2), _f(s.interaction, 2), _f(s.gap, 2)]

    body = [[r.grid, r.model if r.budget is not None else "**pooled**", r.budget if r.budget is not None else "all",
             r.metric, *shares(r.corrected), _f(r.uncorrected.objective, 2), _f(r.uncorrected.searcher, 2), r.n]
            for r in rows]
    return ["Share of the variance across the (objective × searcher) solutions of a model and budget that the "
            "objective and the searcher explain (two-way decomposition without replication; the remainder is their "
            "interaction). **Noise-corrected**, as claim 5.2 judges: each sum of squares less its expected evaluation "
            "noise, measured from the solutions' per-item and per-window outcomes; D = objective − searcher share. "
            "The pooled row sums the corrected sums of squares over the grid's pairs and is the D the verdict "
            "compares with its threshold; the uncorrected shares stand beside for comparison (noise inflates the "
            "searcher's). A dash: the noise is as large as the variance observed, so no share is left to split. "
            "Perplexity is the evaluated C4 perplexity (log), comparable across objectives; n = solutions (pooled: "
            "pairs).", "",
            markdown_table(body, ["grid", "model", "M", "metric", "objective", "searcher", "interaction", "D",
                                    "uncorrected objective", "uncorrected searcher", "n"])]


PARTIAL_TITLE = "Grids not run yet, or run in part"


def not_run_section(missing: Sequence[DeclaredGrid]) -> list[str]:
    """The declared main grids without results, and how to run them."""
    lines = ["No results of these grids are among those read, so their columns in the matrix say NOT RUN:", ""]
    for d in missing:
        where = d.path.as_posix() if not d.path.is_absolute() else d.path.name
        how = ("needs CUDA GPUs and the weights (below)" if d.device == "cuda" else
               f"runs on {d.device}: `pytest bench --grid {d.name} --full-grid --results results`, then "
               "`depthprune report --results results --out REPORT.md`")
        lines.append(f"- `{d.name}` (`{where}`): {d.description or ', '.join(d.models)}; {how}.")
    if any(d.device == "cuda" for d in missing):
        lines += ["", "On a GPU node with the weights in the Hugging Face cache (or `DEPTHPRUNE_MODELS_DIR`) and the "
                  "datasets reachable, one xdist worker per GPU:", "",
                  "```bash",
                  "DEPTHPRUNE_TORCH=torch tox -e full-grid            # or, in an environment with depthprune[all]:",
                  "pytest bench --grid paper -n $(nvidia-smi -L | wc -l) --dist loadgroup --results results/",
                  "depthprune report --results results/ --out REPORT.md",
                  "```", "",
                  "On a SLURM cluster, one task per model: `depthprune submit --grid paper --executor slurm "
                  "--partition <p> --wait --report REPORT.md` (or one job per model: `pytest bench --grid paper "
                  "--model <id> --results results-<id>/`, then `depthprune report --results results-*/`)."]
    return lines + [""]


def slug(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def page_findings(page_lines: list[str], link: str) -> list[str]:
    """One line per ``###`` section of a rendered page: its finding (or what it could not measure)."""
    out, title, said = [], None, False
    for line in page_lines:
        for row in line.split("\n"):
            if row.startswith("### "):
                if title is not None and not said:
                    out.append(f"- [{title}]({link}#{slug(title)}): see the page.")
                title, said = row[4:], False
            elif title is not None and not said and row.startswith(("**Finding", "Not measured")):
                text = re.sub(r"^\*\*Finding[.:]\*\*\s*", "", row)
                out.append(f"- [{title}]({link}#{slug(title)}): {text}")
                said = True
    if title is not None and not said:
        out.append(f"- [{title}]({link}#{slug(title)}): see the page.")
    return out


FIRMNESS_PAGE = "firmness.md"
FIRMNESS_TITLE = "How firmly each set is decided"
SPEED_PAGE = "speed.md"
SPEED_TITLE = "What pruning buys: speed against accuracy"


@dataclass
class Page:
    """A page under ``reports/``, written with REPORT.md and linked from it."""

    title: str
    body: list[str]


@dataclass
class Inputs:
    """What the sections read, computed once."""

    command: str
    dirs: list[Path]
    out: Path
    every: list[Result]  # every result reported (controls included)
    results: list[Result]  # the main grids' results, which the verdicts judge
    dense: dict[tuple[str, str], dict[str, Any]]
    grids: list[str]
    controls_grids: list[str]
    thresholds: Mapping[str, Any]
    verdicts: list[Verdict]
    assessed: dict[str, list[report_firmness.CellFirmness]]
    rejudged: list[report_firmness.Rejudged]
    flips: set[tuple[str, str]]
    missing: list[DeclaredGrid]
    not_run: list[str]
    partial: list[str]
    in_part: list[str]
    figure_paths: list[Path]
    controls: list[str]
    precision: list[str]
    task_baselines: list[str]
    healed: list[Result] = field(default_factory=list)  # healed results: only "After healing" and its claims read them
    pages: dict[str, Page] = field(default_factory=dict)
    page_link: dict[str, str] = field(default_factory=dict)
    speed_points: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # grid -> measured cells
    speed_machines: dict[str, str] = field(default_factory=dict)
    speed_figures: list[Path] = field(default_factory=list)


def head(x: Inputs) -> list[str]:
    """The first screen: the verdict matrix, one line per claim, and links to the pages."""
    lines = [
        "# depthprune report", "",
        f"Generated by `{x.command}` from {len(x.every)} cell results in {', '.join(f'`{d}`' for d in x.dirs)}; "
        "do not edit by hand.", "",
        "## Verdicts: the paper's claims × grids", "",
        *report_verdicts.matrix(x.verdicts, x.not_run, x.flips), "",
        *([f"Run in part: {', '.join(f'`{g}`' for g in x.in_part)} (which cells: [below](#{slug(PARTIAL_TITLE)})).", ""]
          if x.in_part else []),
        "What was found, claim by claim:", "",
        *report_verdicts.findings(x.verdicts), "",
        "The evidence, grid by grid (the long per-condition tables):", "",
    ]
    for g in x.grids:
        rows = [r for r in x.results if r.identity.grid == g]
        models = ", ".join(sorted({r.identity.model for r in rows}))
        target = x.page_link[f"{g}.md"]
        lines.append(f"- [{target}]({target}): grid `{g}`, {len(rows)} cells ({models}): "
                     "each condition's sets, losses, perplexities, costs and accuracies with 95% intervals; Spearman "
                     "per condition; overlaps of removed sets; each searcher against oneshot on the same items.")
    for name, page in x.pages.items():
        if name.removesuffix(".md") not in x.grids:
            lines.append(f"- [{x.page_link[name]}]({x.page_link[name]}): {page.title}, in full.")
    return [*lines, ""]


def partial_section(x: Inputs) -> list[str]:
    """The grids declared in ``cases/`` with no results, and those run in part."""
    if not (x.missing or x.partial):
        return []
    return [f"## {PARTIAL_TITLE}", "", *(not_run_section(x.missing) if x.missing else []),
            *([*x.partial, ""] if x.partial else [])]


def claims_section(x: Inputs) -> list[str]:
    return ["## The claims in detail", "", *claims.render_claims(x.results, x.thresholds, x.verdicts), ""]


def variance(x: Inputs) -> list[str]:
    return ["## Objective vs searcher: shares of variance", "", *variance_section(x.results), ""]


def noise(x: Inputs) -> list[str]:
    tally = {g: tables.noise_tally(analysis.by_condition([r for r in x.results if r.identity.grid == g])) for g in x.grids}
    return ["## Accuracy differences against evaluation noise", "",
            *(f"- `{g}`: {tables.noise_summary(t)}; every pair in [{x.page_link[f'{g}.md']}]({x.page_link[f'{g}.md']})."
              if t.rows else f"- `{g}`: {tables.NOT_MEASURED_NOISE}" for g, t in tally.items()), ""]


def curves(x: Inputs) -> list[str]:
    found = render_curves(find_curves(x.dirs))
    return ["## Calibration-size curve", "", *found] if found else []


def healing(x: Inputs) -> list[str]:
    figures_dir = x.figure_paths[0].parent if x.figure_paths else x.out.parent / "figures"
    return report_healing.section(x.healed, report_healing.find_curves(x.dirs), figures_dir,
                                  lambda p: link(p, x.out.parent))


def baselines(x: Inputs) -> list[str]:
    model_free = render_baselines()
    if not (model_free or x.task_baselines):
        return []
    lines = ["## Task baselines: readers that see no model", "", *model_free, *x.task_baselines]
    if x.task_baselines:
        target = x.page_link["baselines.md"]
        lines += [f"Every reader of every task in this table: [{target}]({target}).", ""]
    return lines


def real(x: Inputs) -> list[str]:
    found = real_section(x.results, x.dense, x.figure_paths, x.out)
    return ["## A real pretrained model on CPU", "", *found] if found else []


def protocol(x: Inputs) -> list[str]:
    return ["## Where a grid departs from the paper's protocol", "", *protocol_section(x.results), ""]


def controls(x: Inputs) -> list[str]:
    if not x.controls:
        return []
    target = x.page_link[f"{'-'.join(x.controls_grids)}.md"]
    return ["## Controls: what the paper could not vary", "",
            f"Controls grid{'s' if len(x.controls_grids) > 1 else ''} {', '.join(f'`{g}`' for g in x.controls_grids)}: "
            f"each control's finding; its tables in [{target}]({target}).", "",
            *page_findings(x.controls, target), ""]


def precision(x: Inputs) -> list[str]:
    if not x.precision:
        return []
    found = [re.sub(r"^\*\*Finding[.:]\*\*\s*", "", row) for line in x.precision for row in line.split("\n")
             if row.startswith("**Finding")]
    return ["## Precision control: bf16 against float32", "",
            f"{' '.join(found) or 'See the page.'} Each grid's figures and every cell whose set moved: "
            f"[{x.page_link['precision.md']}]({x.page_link['precision.md']}).", ""]


def firmness(x: Inputs) -> list[str]:
    return [f"## {FIRMNESS_TITLE}", "", *report_firmness.section(x.assessed, x.rejudged, x.page_link[FIRMNESS_PAGE])]


def speed(x: Inputs) -> list[str]:
    """Per grid with a speed archive: which objective and searcher buy the most speed per accuracy point."""
    lines = [f"## {SPEED_TITLE}", ""]
    measured = [g for g in x.grids if x.speed_points.get(g)]
    missing = [g for g in x.grids if g not in measured]
    if measured:
        target = x.page_link[SPEED_PAGE]
        lines += ["Each pruned model is the rebuilt smaller model, timed against the dense one in alternating "
                  "rounds on the machine named (a measurement, not a reference); accuracy retained is its avg "
                  "accuracy ÷ the dense model's. Per objective and searcher: the median prefill speedup (batch 1, "
                  "long context), the median accuracy retained, and how many of its cells are on the Pareto front "
                  f"(no cell of the same model both faster and more accurate). Every cell: [{target}]({target}).", ""]
    for g in measured:
        lines += [f"**`{g}`** ({x.speed_machines[g]})", "",
                  report_speed.table(report_speed.by_recipe(x.speed_points[g]), report_speed.RECIPE_HEADERS), ""]
    if missing:
        lines += [f"Not measured: {', '.join(f'`{g}`' for g in missing)} (no `speed-<grid>.json` beside the results; "
                  "`depthprune speed --results DIR --grid NAME` writes one).", ""]
    lines += [f"![{p.stem}]({link(p, x.out.parent)})" for p in x.speed_figures]
    return [*lines, ""] if x.speed_figures else lines


def figures(x: Inputs) -> list[str]:
    return ["## Figures", "",
            "Cost vs quality: each searcher's avg accuracy with its 95% interval (error bars; cluster bootstrap of "
            f"its items, {intervals.N_RESAMPLES} resamples, seed {intervals.SEED}) against its cost relative to oneshot's. Removal "
            "heatmaps and single-block profiles carry no error bars: a removed set is exact, and a calibration "
            "loss is exact on its own calibration set (its sampling is what the calibration-seed control varies).",
            "", *(f"![{path.stem}]({link(path, x.out.parent)})" for path in x.figure_paths)]


def environment(x: Inputs) -> list[str]:
    return ["", "## Environment", "", "Cells by the environment that produced them:", "", *env_summary(x.results), ""]


#: REPORT.md's sections, in order
SECTIONS: tuple[Callable[[Inputs], list[str]], ...] = (
    head, partial_section, claims_section, variance, noise, curves, healing, baselines, real, protocol, controls, precision,
    firmness, speed, figures, environment)
