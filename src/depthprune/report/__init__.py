"""REPORT.md from any set of cell results: the verdict matrix first, then the evidence.

    depthprune report --results results/ [--results other-shard/] --out REPORT.md

Results from several machines or shards merge (a cell found twice keeps the newest).
Everything in the report is computed here from the result files; nothing is typed in.

The layout is for a reader: the first screen is the claims × grids matrix and one line per
claim on what was found; the claims' statistics, the variance shares, the protocol's departures
and the controls' findings follow; the long per-condition tables go to one page per grid under
``reports/`` (beside REPORT.md), linked from it. Prose is wrapped at 160 columns. The README's
verdict block (:mod:`depthprune.report.readme`) is written from the same verdicts. Each section is one
function of :mod:`depthprune.report.sections`, in the order of its ``SECTIONS``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from depthprune.common import layout
from depthprune.report import analysis, claims, firmness, sections, tables
from depthprune.report import readme as report_readme
from depthprune.report import speed as report_speed
from depthprune.report.baselines import render_task_baselines
from depthprune.report.controls import is_control, render_controls
from depthprune.report.grids import declared_grids, partial_grids, partial_lines
from depthprune.report.precision import render_precision
from depthprune.report.wrap import wrap_markdown
from depthprune.results.schema import Result
from depthprune.results.store import iter_dense, iter_results
from depthprune.verify.firmness import read_rivals

__all__ = ["GENERATED", "figures_for", "readme_block", "reported", "write_report"]

#: the first line of every page written under reports/: how a stale one is told from a hand-written file
GENERATED = "<!-- written by `depthprune report` with REPORT.md; do not edit by hand -->"


def _page(title: str, report_link: str, body: list[str]) -> list[str]:
    return [GENERATED, f"# {title}", "", f"Part of [REPORT.md]({report_link}), written with it from the same results.",
            "", *body]


def _grid_page(grid: str, results: list[Result], dense) -> sections.Page:
    mine = [r for r in results if r.identity.grid == grid]
    conds = analysis.by_condition(mine)
    return sections.Page(f"Grid `{grid}`: the per-condition tables", [
        "## Results per model, objective and budget", "", *tables.results_section(mine, conds, dense),
        "## Calibration loss vs accuracy (Spearman)", "", *tables.spearman_section(conds), "",
        "## Overlap of removed sets", "", *tables.overlap_section(conds), "",
        "## Accuracy differences against evaluation noise", "", *tables.noise_section(conds), ""])


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("\n".join(wrap_markdown(lines)))


def reported(results_dirs: Iterable[str | Path]) -> tuple[list[Result], list[Result]]:
    """(every result the report reads, the main grids' results the verdicts judge): CI slices are
    never reported (cheaper repeats), controls only in their own sections."""
    dirs = [Path(d) for d in results_dirs]
    every = report_speed.attach([r for r in iter_results(dirs) if r.get("grid_kind") != "slice"], report_speed.read_speed(dirs))
    return every, [r for r in every if not is_control(r)]


def readme_block(results_dirs: Iterable[str | Path], readme: str | Path, report: str | Path,
                 cases_dir: str | Path | None = layout.CASES) -> list[str]:
    """The README verdict block ``write_report`` writes for these results (what a test compares)."""
    _, results = reported(results_dirs)
    grids = {r.identity.grid for r in results}
    declared = declared_grids(cases_dir)
    not_run = [d.name for d in declared if d.name not in grids]
    in_part = list(partial_grids([d for d in declared if d.name in grids], results))
    healed = list(iter_results([Path(d) for d in results_dirs], healed=True))
    return report_readme.block(claims.judge_all([*results, *healed], claims.load_thresholds()), not_run, readme, report,
                               in_part)


def write_report(results_dirs: Iterable[str | Path], out: str | Path = layout.REPORT,
                 figures_dir: str | Path | None = None, command: str = "depthprune report",
                 reference_dir: str | Path = layout.REFERENCE, cases_dir: str | Path | None = layout.CASES,
                 reports_dir: str | Path | None = None, readme: str | Path | None = None) -> Path:
    """Write REPORT.md (``out``), its pages under ``reports_dir`` (default ``reports/`` beside it) and its
    figures; with ``readme``, rewrite that README's verdict block too (it must have the markers).
    ``cases_dir``: where the declared grids are read, for the matrix's NOT RUN columns. The sections are
    :data:`depthprune.report.sections.SECTIONS`, in order."""
    dirs = [Path(d) for d in results_dirs]
    every, results = reported(dirs)
    dense = {(d["grid"], d["model"]): d for d in iter_dense(dirs)}
    out = Path(out)
    if readme is not None and not report_readme.has_block(readme):
        raise ValueError(f"{readme}: no verdict block to rewrite (a line starting '<!-- verdicts:start' and one "
                         f"'{report_readme.END}')")
    figures = Path(figures_dir) if figures_dir is not None else out.parent / layout.FIGURES
    figures.mkdir(parents=True, exist_ok=True)
    reports = Path(reports_dir) if reports_dir is not None else out.parent / layout.REPORTS
    grids = analysis.grids_of(results)
    thresholds = claims.load_thresholds()
    healed = list(iter_results(dirs, healed=True))  # only the healing claims read them (Claim.reads_healed)
    verdicts = claims.judge_all([*results, *healed], thresholds)
    assessed = firmness.assess(every)
    rivals = read_rivals(sorted(p for d in dirs for p in d.glob(layout.RIVALS_GLOB)))
    rejudged = firmness.rejudge(results, verdicts, assessed, thresholds, rivals)
    declared = declared_grids(cases_dir)
    missing = [d for d in declared if d.name not in grids]
    partly = partial_grids([d for d in declared if d.name in grids], results)
    task_baselines, task_baselines_page = render_task_baselines()
    x = sections.Inputs(
        command=command, dirs=dirs, out=out, every=every, results=results, dense=dense, grids=grids,
        controls_grids=analysis.grids_of(r for r in every if is_control(r)), thresholds=thresholds,
        verdicts=verdicts, assessed=assessed, rejudged=rejudged, flips=firmness.flippable(rejudged), missing=missing,
        not_run=[d.name for d in missing], partial=partial_lines(partly), in_part=list(partly),
        figure_paths=figures_for(analysis.by_condition(results), figures, grids, dense), controls=render_controls(every),
        precision=render_precision(every, reference_dir), task_baselines=task_baselines, healed=healed)

    x.pages = {f"{g}.md": _grid_page(g, results, dense) for g in grids}
    if x.controls:
        x.pages[f"{'-'.join(x.controls_grids)}.md"] = sections.Page("Controls: what the paper could not vary", x.controls)
    if x.precision:
        x.pages["precision.md"] = sections.Page("Precision control: bf16 against float32", x.precision)
    if task_baselines_page:
        x.pages["baselines.md"] = sections.Page("Task baselines: every reader of every other task", task_baselines_page)
    x.pages[sections.FIRMNESS_PAGE] = sections.Page(sections.FIRMNESS_TITLE, firmness.page(assessed, rejudged))
    speed = report_speed.read_speed(dirs)
    x.speed_points = {g: report_speed.points(results, dense, g) for g in grids if any(k[0] == g for k in speed)}
    x.speed_machines = {g: report_speed.machine_line(speed, g) for g in x.speed_points}
    x.speed_figures = [f for g, pts in x.speed_points.items() if (f := report_speed.figure(pts, figures, g)) is not None]
    if x.speed_points:
        x.pages[sections.SPEED_PAGE] = sections.Page(sections.SPEED_TITLE, report_speed.page(x.speed_points, x.speed_machines))
    x.page_link = {name: sections.link(reports / name, out.parent) for name in x.pages}

    _write(out, [line for section in sections.SECTIONS for line in section(x)])
    reports.mkdir(parents=True, exist_ok=True)
    for stale in reports.glob("*.md"):
        if stale.name not in x.pages and stale.read_text(encoding="utf-8").startswith(GENERATED):
            stale.unlink()
    to_report = sections.link(out, reports)
    for name, page in x.pages.items():
        _write(reports / name, _page(page.title, to_report, page.body))
    if readme is not None:
        report_readme.rewrite(readme, report_readme.block(verdicts, x.not_run, readme, out, x.in_part))
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
