"""REPORT's "After healing": each grid's healing curve and its budget, a before/after table per condition, a
figure of every cell's accuracy before against after, and where the budget stands against the literature's.

Before and after are both the healed result's own float32 evaluations of its set (``healing.before_float32`` and
the result's metrics), so a row differs by the heal alone; the verdicts are the healing claims' (the matrix).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from depthprune.common.jsonio import read_json
from depthprune.common.text_tables import significant
from depthprune.healing.budget import first_written_budget
from depthprune.healing.config import MAIN_METHOD, HealConfig
from depthprune.report import noise
from depthprune.report.claims import helpers, load_thresholds
from depthprune.report.claims.healing import main_method, seed_spread
from depthprune.results.schema import Result

#: the peers' budget (Shortened LLaMA, LLM-Pruner: 2 epochs of Alpaca-cleaned's 51,760 samples at a 256-token
#: cutoff, ~180 tokens a sample) and Gromov et al.'s (164 M tokens of C4): DESIGN.md, "Healing"
LITERATURE_TOKENS = {"Shortened LLaMA / LLM-Pruner": 19_000_000, "Gromov et al. 2024": 164_000_000}
#: the tiny family's training tokens (depthprune.tiny.train: 1,500 steps x 8 x 256; tiny-llama3.1 adds 900 x 4 x 512)
TINY_TRAINING_TOKENS = {"tiny-llama3": 3_072_000, "tiny-qwen3": 3_072_000, "tiny-llama3.1": 4_915_200}
CURVE_GLOB = "healing-curve-*.json"


def find_curves(dirs: Iterable[Path]) -> list[dict[str, Any]]:
    return [dict(read_json(p)) for d in dirs for p in sorted(Path(d).glob(CURVE_GLOB))]


def _fmt(value: Any) -> str:
    return "-" if value is None else significant(value) if isinstance(value, float) else str(value)


def curve_lines(curve: Mapping[str, Any]) -> list[str]:
    grid = curve["grid"]
    gaps = sorted((int(t), float(g)) for t, g in curve.get("mean_gap", {}).items())
    steps = [f"{t:,} → {t2:,}: {(g - g2) / g:.1%}" for (t, g), (t2, g2) in zip(gaps, gaps[1:]) if g > 0]
    revision = curve.get("revision")
    if revision is None:  # a curve judged by the rule as first written
        rule = ("The rule, written before it ran (DESIGN.md, \"Healing\"): the budget is the first doubling that "
                "recovers less than 10% of the C4 log-perplexity gap to the dense model that is left, else the cap "
                "the grid's time limit allows.")
    else:
        read_before = grid in revision.get("curves_read_before", [])
        rule = ("The rule (DESIGN.md, \"Healing\"): the budget is the first doubling that recovers less than 10% of "
                "the C4 log-perplexity gap to the dense model that is left once that share has stopped growing, "
                "else the cap the grid's time limit allows. Written before any curve ran; revised "
                f"{revision['date']} ({revision['what']}) "
                + ("after this curve was read, so this budget is not a blind choice: as first written the rule "
                   "picked the first point." if read_before else "before this curve ran."))
        first = first_written_budget(dict(gaps), int(curve.get("cap", 0))) if gaps and not read_before else None
        if first is not None and first != curve["budget"]:
            rule += f" As first written the rule would have picked {first:,} tokens here."
    lines = [f"**`{grid}`: the healing curve.** {rule}", "",
             f"Budget: **{curve['budget']:,} tokens** ({curve['why']}); cap {curve.get('cap', 0):,} tokens "
             f"(the grid's {curve['jobs']} heals within {curve['limit_s'] / 60:.0f} min at "
             f"{_fmt(curve.get('cap_from', {}).get('tokens_per_second'))} tokens/s, measured at the first point). "
             + (f"Its points took {curve['points_seconds'] / 60:.1f} min of healing and evaluation, each timed when "
              "it ran" if "points_seconds" in curve else f"The curve took {curve['seconds'] / 60:.1f} min")
             + (" (per model, the dense evaluation included: " + ", ".join(
                 f"{m} {v / 60:.1f} min" for m, v in curve["model_seconds"].items()) + ")."
                if "model_seconds" in curve else "."), "",
             *([f"Share of the gap left that each doubling recovers: {'; '.join(steps)}; from the first point to "
                f"the last, {(gaps[0][1] - gaps[-1][1]) / gaps[0][1]:.1%}. A share that grows with the budget means "
                "the heal is still in its slow start.", ""] if steps else []),
             "| model | removed | tokens | C4 ppl | avg acc | dense C4 ppl | heal s |", "|---|---|---|---|---|---|---|"]
    for p in curve["points"]:
        lines.append(f"| {p['model']} | {p['removed']} | {p['tokens']:,} | {_fmt(p['c4_ppl'])} | {_fmt(p['avg_acc'])} "
                     f"| {_fmt(p['dense_c4_ppl'])} | {_fmt(p.get('heal_seconds'))} |")
    budget = int(curve["budget"])
    shares = "; ".join(f"{100 * budget / t:.2g}% of {name}'s {t / 1e6:.0f} M" for name, t in LITERATURE_TOKENS.items())
    lines += ["", f"A light heal: {budget:,} tokens is {shares} tokens."]
    if grid == "tiny":
        lines[-1] += " For the tiny models, trained here, it is " + ", ".join(
            f"{100 * budget / t:.2g}% of {m}'s {t / 1e6:.1f} M training tokens" for m, t in TINY_TRAINING_TOKENS.items()) + "."
    return [*lines, ""]


def before_after_lines(healed: Sequence[Result]) -> list[str]:
    by: dict[tuple[str, str, str, int], list[Result]] = defaultdict(list)
    for r in healed:
        if r.get("healing", {}).get("before_float32"):
            by[(r.identity.grid or "", r.identity.model, r.identity.objective, r.identity.budget)].append(r)
    if not by:
        return []
    lines = ["| grid | model | objective | M | searcher | heal | avg acc before → after | C4 ppl before → after |",
             "|---|---|---|---|---|---|---|---|"]
    for (grid, model, objective, budget), rows in sorted(by.items()):
        for r in sorted(rows, key=lambda r: (r.identity.search, r.identity.heal or "")):
            b = r["healing"]["before_float32"]["metrics"]
            a = r["metrics"]
            lines.append(f"| {grid} | {model} | {objective} | {budget} | {r.identity.search} | {r.identity.heal} | "
                         f"{_fmt(b.get('avg_acc'))} → {_fmt(a.get('avg_acc'))} | "
                         f"{_fmt(b.get('c4_ppl'))} → {_fmt(a.get('c4_ppl'))} |")
    return [*lines, ""]


def method_difference(pairs: Sequence[tuple[Result, Result]], label: str, healed: Sequence[Result],
                      t: Mapping[str, Any] | None = None) -> str:
    """Over ``pairs`` (the main method's heal, another's, of one set on one seed; one grid and method): the mean over sets of
    the other's avg accuracy minus the main's, with its noise. Written 2026-12-07, after the tiny grid's point
    estimates were read, and it judges nothing: both heals of a set are evaluated on the same items, so one
    bootstrap of the item clusters draws every pair (the healing claims' ``n_resamples``, ``seed``,
    ``confidence`` and ``power``, ``claims.toml`` [heal-objective]); the interval is its percentiles; the MDE is
    the bootstrap's, with the heals' seed noise added in quadrature: each difference holds two heals, each
    moving by the main method's seed SD ``s`` (:func:`~depthprune.report.claims.healing.seed_spread`), so the
    mean of n differences by ``s`` x sqrt(2 / n)."""
    t = t if t is not None else load_thresholds()["heal-objective"]
    both = [(m, r) for m, r in pairs if m["metrics"].get("avg_acc") is not None
            and r["metrics"].get("avg_acc") is not None]
    known = [(m["metrics"]["avg_acc"], r["metrics"]["avg_acc"]) for m, r in both]
    if not known:
        return f"`{label}`: no set has both methods' avg accuracy: not measured."
    n = len(known)
    mean = sum(b - a for a, b in known) / n
    models = ", ".join(sorted({m.identity.model for m, _ in both}))  # the models of the n sets counted
    head = (f"`{label}`, over {n} sets ({models}), the other method's avg accuracy minus the main method's: "
            f"mean {mean:+.4f}; higher on {sum(b > a for a, b in known)}, lower on {sum(b < a for a, b in known)}")
    sols = [m for m, _ in pairs] + [r for _, r in pairs]
    if len(known) < len(pairs):
        return head + ". Its noise is not measured: a heal lacks its avg accuracy. Not judged."
    if helpers.blocks(sols, "avg_acc") is None:
        return head + ". Its noise is not measured: a heal lacks per-item outcomes. Not judged."
    _, ((draws, _),) = helpers.measured_groups([sols], "avg_acc", t["n_resamples"], t["seed"])
    diff = (np.asarray(draws)[:, n:] - np.asarray(draws)[:, :n]).mean(axis=1)
    low, high = helpers.interval(diff, t["confidence"])
    spread = seed_spread(healed)  # it reads the main method's heals only
    mde = math.hypot(helpers.mde(diff, t), noise.z_sum(t["confidence"], t["power"]) * spread * math.sqrt(2 / n))
    where = ("contains 0" if low <= 0 <= high else "lies above 0" if low > 0 else "lies below 0")
    return (head + f"; {t['confidence']:.0%} interval over the evaluation's items [{low:+.4f}, {high:+.4f}] "
            f"({where}), smallest detectable difference {mde:.4f} (the main method's seed SD {spread:.4f} "
            "included). Not judged: no claim reads it.")


def beside_lines(healed: Sequence[Result]) -> list[str]:
    """Another method's heals (measured on a subset, read by no claim) beside the main method's heal of the same
    set on the same seed: C4 ppl and avg acc before, after the main method, after the other."""
    def key(r: Result) -> tuple[Any, ...]:
        seed = HealConfig.parse_tag(r.identity.heal)[2] if r.identity.heal else -1
        return r.identity.grid, r.identity.model, tuple(sorted(r["removed"])), seed

    main = {key(r): r for r in healed if main_method(r)}
    pairs = []
    for r in healed:
        if r.identity.heal is None or main_method(r):
            continue
        m = main.get(key(r))
        if m is not None and r.get("healing", {}).get("before_float32"):
            pairs.append((m, r))
    if not pairs:
        return []
    methods = sorted({HealConfig.parse_tag(r.identity.heal)[0] for _, r in pairs if r.identity.heal})
    lines = [f"**A second method beside the first** ({', '.join(methods)} against {MAIN_METHOD}, on the same sets, "
             "seeds and windows; DESIGN.md, \"Healing\"). No claim reads it.", "",
             "| grid | model | removed | heal | C4 ppl before → main → this | avg acc before → main → this |",
             "|---|---|---|---|---|---|"]
    for m, r in sorted(pairs, key=lambda p: (p[1].identity.grid or "", p[1].identity.model, sorted(p[1]["removed"]),
                                             p[1].identity.heal or "")):
        b = r["healing"]["before_float32"]["metrics"]
        lines.append(f"| {r.identity.grid} | {r.identity.model} | {sorted(r['removed'])} | {r.identity.heal} | "
                     f"{_fmt(b.get('c4_ppl'))} → {_fmt(m['metrics'].get('c4_ppl'))} → "
                     f"{_fmt(r['metrics'].get('c4_ppl'))} | "
                     f"{_fmt(b.get('avg_acc'))} → {_fmt(m['metrics'].get('avg_acc'))} → "
                     f"{_fmt(r['metrics'].get('avg_acc'))} |")

    def where(r: Result) -> tuple[str, str]:  # r is another method's heal: its tag is set
        return r.identity.grid or "", HealConfig.parse_tag(str(r.identity.heal))[0]

    for grid, method in sorted({where(r) for _, r in pairs}):
        # the seed noise of this grid's own heals: another grid's seed pairs measure other models
        lines += ["", method_difference([p for p in pairs if where(p[1]) == (grid, method)], f"{grid}, {method}",
                                        [r for r in healed if (r.identity.grid or "") == grid])]
    return [*lines, ""]


def figure(healed: Sequence[Result], path: Path) -> Path | None:
    """Each healed cell's avg accuracy before against after, coloured by objective."""
    points = [(r.identity.objective, r["healing"]["before_float32"]["metrics"].get("avg_acc"),
               r["metrics"].get("avg_acc")) for r in healed if r.get("healing", {}).get("before_float32")]
    points = [p for p in points if p[1] is not None and p[2] is not None]
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 5))
    for objective, colour in (("ppl", "tab:blue"), ("margin", "tab:orange")):
        xs = [b for o, b, _ in points if o == objective]
        ys = [a for o, _, a in points if o == objective]
        if xs:
            ax.scatter(xs, ys, s=14, c=colour, label=objective, alpha=0.8)
    lo = min(min(b, a) for _, b, a in points) - 0.02
    hi = max(max(b, a) for _, b, a in points) + 0.02
    ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8, ls="--")
    ax.set(xlabel="avg accuracy before healing (float32)", ylabel="avg accuracy after healing",
           title="Each cell's set, before and after its heal")
    ax.legend(title="objective")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return path


def section(healed: Sequence[Result], curves: Sequence[Mapping[str, Any]], figures_dir: Path,
            link: Any) -> list[str]:
    """The lines of "After healing" (empty: no healed result and no curve was read)."""
    if not healed and not curves:
        return []
    lines = ["## After healing", "",
             "Each distinct removed set healed once (LoRA through PEFT, the peers' settings, a fixed token budget, "
             "float32), evaluated before and after with the grid's evaluation; the verdicts are the healing "
             "claims' rows of the matrix. DESIGN.md, \"Healing\", holds the rules, written before any healed "
             "result was read.", ""]
    for curve in curves:
        lines += curve_lines(curve)
    main = [r for r in healed if main_method(r)]  # the claims' heals; another method's go beside them
    lines += before_after_lines(main)
    lines += beside_lines(healed)
    for grid in sorted({r.identity.grid or "" for r in main}):
        path = figure([r for r in main if r.identity.grid == grid], figures_dir / f"healing-{grid}.png")
        if path is not None:
            lines += [f"![healing-{grid}]({link(path)})", ""]
    return lines
