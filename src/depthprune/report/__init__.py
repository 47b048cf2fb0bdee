"""REPORT.md from any set of cell results: the verdict matrix first, then the evidence.

    depthprune report --results results/ [--results other-shard/] --out REPORT.md

Results from several machines or shards merge (a cell found twice keeps the newest).
Everything in the report is computed here from the result files; nothing is typed in.

The layout is for a reader: the first screen is the claims × grids matrix and one line per
claim on what was found; the claims' statistics, the variance shares, the protocol's departures
and the controls' findings follow; the long per-condition tables go to one page per grid under
``reports/`` (beside REPORT.md), linked from it. Prose is wrapped at 160 columns. The README's
verdict block (:mod:`depthprune.report.readme`) is written from the same verdicts.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tabulate import tabulate

from depthprune.grid.results import iter_dense, iter_results
from depthprune.report import analysis as A
from depthprune.report import claims
from depthprune.report import firmness as F
from depthprune.report import intervals as I
from depthprune.report import readme as R
from depthprune.report import tables as T
from depthprune.report import verdicts as V
from depthprune.report.baselines import BASELINES, render_baselines, render_task_baselines
from depthprune.report.calibration_curve import find_curves, render_curves
from depthprune.report.cells import fmt as _f
from depthprune.report.cells import table as _fit_table
from depthprune.report.controls import is_control, render_controls
from depthprune.report.grids import DeclaredGrid, declared_grids, partial_grids, partial_lines
from depthprune.report.precision import render_precision
from depthprune.report.variance import share_rows
from depthprune.report.wrap import wrap_markdown
from depthprune.task_baselines import FROZEN as TASK_BASELINES
from depthprune.task_baselines import chance as task_chance
from depthprune.verify.firmness import read_rivals

#: the first line of every page written under reports/: how a stale one is told from a hand-written file
GENERATED = "<!-- written by `depthprune report` with REPORT.md; do not edit by hand -->"


def _link(target: Path, base: Path) -> str:
    """``target`` relative to the directory ``base``, as a markdown link target."""
    return Path(os.path.relpath(target.resolve(), base.resolve())).as_posix()


def _env_summary(results: list[dict[str, Any]]) -> list[str]:
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
    chances = _frozen_chances()
    for grid, model in sorted({(r["grid"], r["model"]) for r in results if r.get("profile") == "real"}):
        card = _model_card(model)
        rows = [r for r in results if r["grid"] == grid and r["model"] == model]
        lines += [f"### {model} ({grid} grid)", "",
                  f"**One small real model, not the paper's.** {card.get('what', model)}; "
                  f"{card.get('parameters', '?'):,} parameters, {card.get('layers', rows[0]['n_layers'])} blocks "
                  f"(the paper's models: 8B, 32–36 blocks). Its phenomena are this model's; they neither confirm "
                  "nor refute the paper's numbers, only whether its claims can be seen in a real pretrained "
                  f"network at this grid's calibration and evaluation sizes. {len(rows)} cells here — searchers "
                  f"{', '.join(sorted({r['search'] for r in rows}, key=A.searcher_rank))}, objectives "
                  f"{', '.join(sorted({r['objective'] for r in rows}))}, M = "
                  f"{', '.join(str(b) for b in sorted({r['budget'] for r in rows}))}; its verdicts above rest on "
                  "these cells only.", ""]
        lines += [f"- {text}" for text in card.get("implications", [])]
        measured = card.get("measured", {}).get("tasks", {}).get("tasks", {})
        record = dense.get((grid, model), {})
        d = record.get("metrics", {})
        table = []
        card_tasks = {lm_name.removeprefix("real_"): m for lm_name, m in measured.items()}
        graded = _evaluated_tasks(d)  # the grid's own tasks first: they are what its verdicts read
        for short in [*graded, *sorted(set(card_tasks) - set(graded))]:
            m = card_tasks.get(short, {})
            for metric in ("acc", "acc_norm"):
                if metric in m or f"{short}_{metric}" in d:
                    n = m.get("n")
                    on_card = ("–" if metric not in m else I.wilson(m[metric], n).points()
                               if isinstance(n, int) and n > 0 else _f(m[metric], 3))
                    sliced = T.accuracy_cell(record, [short], lambda _t, k=metric: k, d.get(f"{short}_{metric}"))
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
                          "the prior every searcher shares):", "", f"![{path.stem}]({_link(path, out.parent)})"]
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
            for name, entry in json.loads(path.read_text(encoding="utf-8"))["tasks"].items():
                out.setdefault(name, round(task_chance(readers_of(entry)), 3))
    return out


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
    return I.wilson(entry["accuracy"], n).points() if n else f"{100 * entry['accuracy']:.1f} [–]"


def _variance_section(results: list[dict[str, Any]]) -> list[str]:
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
            tabulate(body, headers=["grid", "model", "M", "metric", "objective", "searcher", "interaction", "D",
                                    "uncorrected objective", "uncorrected searcher", "n"],
                     tablefmt="github", disable_numparse=True)]


PARTIAL_TITLE = "Grids not run yet, or run in part"


def _not_run_section(missing: Sequence[DeclaredGrid]) -> list[str]:
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


def _slug(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def _findings(page_lines: list[str], link: str) -> list[str]:
    """One line per ``###`` section of a rendered page: its finding (or what it could not measure)."""
    out, title, said = [], None, False
    for line in page_lines:
        for row in line.split("\n"):
            if row.startswith("### "):
                if title is not None and not said:
                    out.append(f"- [{title}]({link}#{_slug(title)}): see the page.")
                title, said = row[4:], False
            elif title is not None and not said and row.startswith(("**Finding", "Not measured")):
                text = re.sub(r"^\*\*Finding[.:]\*\*\s*", "", row)
                out.append(f"- [{title}]({link}#{_slug(title)}): {text}")
                said = True
    if title is not None and not said:
        out.append(f"- [{title}]({link}#{_slug(title)}): see the page.")
    return out


def _page(title: str, report_link: str, body: list[str]) -> list[str]:
    return [GENERATED, f"# {title}", "", f"Part of [REPORT.md]({report_link}), written with it from the same results.",
            "", *body]


def _grid_page(grid: str, results: list[dict[str, Any]], dense, report_link: str) -> list[str]:
    mine = [r for r in results if r["grid"] == grid]
    conds = A.by_condition(mine)
    return _page(f"Grid `{grid}`: the per-condition tables", report_link, [
        "## Results per model, objective and budget", "", *T.results_section(mine, conds, dense),
        "## Calibration loss vs accuracy (Spearman)", "", *T.spearman_section(conds), "",
        "## Overlap of removed sets", "", *T.overlap_section(conds), "",
        "## Accuracy differences against evaluation noise", "", *T.noise_section(conds), ""])


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(wrap_markdown(lines)))


FIRMNESS_PAGE = "firmness.md"
FIRMNESS_TITLE = "How firmly each set is decided"


def reported(results_dirs: Iterable[str | Path]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(every result the report reads, the main grids' results the verdicts judge): CI slices are
    never reported (cheaper repeats), controls only in their own sections."""
    every = [r for r in iter_results([Path(d) for d in results_dirs]) if r.get("grid_kind") != "slice"]
    return every, [r for r in every if not is_control(r)]


def readme_block(results_dirs: Iterable[str | Path], readme: str | Path, report: str | Path,
                 cases_dir: str | Path | None = "cases") -> list[str]:
    """The README verdict block ``write_report`` writes for these results (what a test compares)."""
    _, results = reported(results_dirs)
    grids = {r["grid"] for r in results}
    declared = declared_grids(cases_dir)
    not_run = [d.name for d in declared if d.name not in grids]
    in_part = list(partial_grids([d for d in declared if d.name in grids], results))
    return R.block(claims.judge_all(results, claims.load_thresholds()), not_run, readme, report, in_part)


def write_report(results_dirs: Iterable[str | Path], out: str | Path = "REPORT.md",
                 figures_dir: str | Path | None = None, command: str = "depthprune report",
                 reference_dir: str | Path = "reference", cases_dir: str | Path | None = "cases",
                 reports_dir: str | Path | None = None, readme: str | Path | None = None) -> Path:
    """Write REPORT.md (``out``), its pages under ``reports_dir`` (default ``reports/`` beside it) and its
    figures; with ``readme``, rewrite that README's verdict block too (it must have the markers).
    ``cases_dir``: where the declared grids are read, for the matrix's NOT RUN columns."""
    dirs = [Path(d) for d in results_dirs]
    every, results = reported(dirs)
    dense = {(d["grid"], d["model"]): d for d in iter_dense(dirs)}
    out = Path(out)
    if readme is not None and not R.has_block(readme):
        raise ValueError(f"{readme}: no verdict block to rewrite (a line starting '<!-- verdicts:start' and one "
                         f"'{R.END}')")
    figures = Path(figures_dir) if figures_dir is not None else out.parent / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    reports = Path(reports_dir) if reports_dir is not None else out.parent / "reports"
    conds = A.by_condition(results)
    grids = sorted({r["grid"] for r in results})
    controls_grids = sorted({r["grid"] for r in every if is_control(r)})
    thresholds = claims.load_thresholds()
    verdicts = claims.judge_all(results, thresholds)
    assessed = F.assess(every)
    rivals = read_rivals(sorted(p for d in dirs for p in d.glob("rivals-*.json")))
    rejudged = F.rejudge(results, verdicts, assessed, thresholds, rivals)
    flips = F.flippable(rejudged)
    declared = declared_grids(cases_dir)
    missing = [d for d in declared if d.name not in grids]
    not_run = [d.name for d in missing]
    figure_paths = figures_for(conds, figures, grids, dense)
    to_report = _link(out, reports)

    pages: dict[str, list[str]] = {f"{g}.md": _grid_page(g, results, dense, to_report) for g in grids}
    controls = render_controls(every)
    if controls:
        pages[f"{'-'.join(controls_grids)}.md"] = _page("Controls: what the paper could not vary", to_report, controls)
    precision = render_precision(every, reference_dir)
    if precision:
        pages["precision.md"] = _page("Precision control: bf16 against float32", to_report, precision)
    task_baselines, task_baselines_page = render_task_baselines()
    if task_baselines_page:
        pages["baselines.md"] = _page("Task baselines: every reader of every other task", to_report,
                                      task_baselines_page)
    pages[FIRMNESS_PAGE] = _page(FIRMNESS_TITLE, to_report, F.page(assessed, rejudged))
    page_link = {name: _link(reports / name, out.parent) for name in pages}
    partly = partial_grids([d for d in declared if d.name in grids], results)
    partial, in_part = partial_lines(partly), list(partly)

    lines = [
        "# depthprune report", "",
        f"Generated by `{command}` from {len(every)} cell results in {', '.join(f'`{d}`' for d in dirs)}; "
        "do not edit by hand.", "",
        "## Verdicts: the paper's claims × grids", "",
        *V.matrix(verdicts, not_run, flips), "",
        *([f"Run in part: {', '.join(f'`{g}`' for g in in_part)} (which cells: [below](#{_slug(PARTIAL_TITLE)})).", ""]
          if in_part else []),
        "What was found, claim by claim:", "",
        *V.findings(verdicts), "",
        "The evidence, grid by grid (the long per-condition tables):", "",
    ]
    for g in grids:
        rows = [r for r in results if r["grid"] == g]
        models = ", ".join(sorted({r["model"] for r in rows}))
        lines.append(f"- [{page_link[f'{g}.md']}]({page_link[f'{g}.md']}): grid `{g}`, {len(rows)} cells ({models}): "
                     "each condition's sets, losses, perplexities, costs and accuracies with 95% intervals; Spearman "
                     "per condition; overlaps of removed sets; each searcher against oneshot on the same items.")
    for name in pages:
        if name.removesuffix(".md") not in grids:
            lines.append(f"- [{page_link[name]}]({page_link[name]}): {pages[name][1][2:]}, in full.")
    lines.append("")
    if missing or partial:
        lines += [f"## {PARTIAL_TITLE}", ""]
        lines += _not_run_section(missing) if missing else []
        lines += [*partial, ""] if partial else []
    lines += ["## The claims in detail", "", *claims.render_claims(results, thresholds, verdicts), ""]
    lines += ["## Objective vs searcher: shares of variance", "", *_variance_section(results), ""]
    tally = {g: T.noise_tally(A.by_condition([r for r in results if r["grid"] == g])) for g in grids}
    lines += ["## Accuracy differences against evaluation noise", "",
              *(f"- `{g}`: {T.noise_summary(t)}; every pair in [{page_link[f'{g}.md']}]({page_link[f'{g}.md']})."
                if t.rows else f"- `{g}`: {T.NOT_MEASURED_NOISE}" for g, t in tally.items()), ""]
    curves = render_curves(find_curves(dirs))
    if curves:
        lines += ["## Calibration-size curve", "", *curves]
    baselines = render_baselines()
    if baselines or task_baselines:
        lines += ["## Task baselines: readers that see no model", "", *baselines, *task_baselines]
        if task_baselines:
            lines += [f"Every reader of every task in this table: [{page_link['baselines.md']}]({page_link['baselines.md']}).",
                      ""]
    real = _real_section(results, dense, figure_paths, out)
    if real:
        lines += ["## A real pretrained model on CPU", "", *real]
    lines += ["## Where a grid departs from the paper's protocol", "", *_protocol_section(results), ""]
    if controls:
        name = f"{'-'.join(controls_grids)}.md"
        lines += ["## Controls: what the paper could not vary", "",
                  f"Controls grid{'s' if len(controls_grids) > 1 else ''} {', '.join(f'`{g}`' for g in controls_grids)}: "
                  f"each control's finding; its tables in [{page_link[name]}]({page_link[name]}).", "",
                  *_findings(controls, page_link[name]), ""]
    if precision:
        found = [re.sub(r"^\*\*Finding[.:]\*\*\s*", "", row) for line in precision for row in line.split("\n")
                 if row.startswith("**Finding")]
        lines += ["## Precision control: bf16 against float32", "",
                  f"{' '.join(found) or 'See the page.'} Each grid's figures and every cell whose set moved: "
                  f"[{page_link['precision.md']}]({page_link['precision.md']}).", ""]
    lines += [f"## {FIRMNESS_TITLE}", "", *F.section(assessed, rejudged, page_link[FIRMNESS_PAGE])]
    lines += ["## Figures", "",
              "Cost vs quality: each searcher's avg accuracy with its 95% interval (error bars; cluster bootstrap of "
              f"its items, {I.N_RESAMPLES} resamples, seed {I.SEED}) against its cost relative to oneshot's. Removal "
              "heatmaps and single-block profiles carry no error bars: a removed set is exact, and a calibration "
              "loss is exact on its own calibration set (its sampling is what the calibration-seed control varies).",
              ""]
    lines += [f"![{path.stem}]({_link(path, out.parent)})" for path in figure_paths]
    lines += ["", "## Environment", "", "Cells by the environment that produced them:", "", *_env_summary(results), ""]

    _write(out, lines)
    reports.mkdir(parents=True, exist_ok=True)
    for stale in reports.glob("*.md"):
        if stale.name not in pages and stale.read_text(encoding="utf-8").startswith(GENERATED):
            stale.unlink()
    for name, page in pages.items():
        _write(reports / name, page)
    if readme is not None:
        R.rewrite(readme, R.block(verdicts, not_run, readme, out, in_part))
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
