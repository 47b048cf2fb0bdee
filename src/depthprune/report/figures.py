"""Figures for REPORT.md (matplotlib, PNG): removal heatmaps, cost vs quality, single-layer profiles.

File names are stable and content-determined (no timestamps in metadata), so a
regenerated figure only differs when the results do.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib import ticker  # noqa: E402

from depthprune.report.analysis import searcher_rank  # noqa: E402
from depthprune.results.schema import Condition, Result  # noqa: E402

_PNG_META = {"Software": None}  # keep files byte-stable across matplotlib versions' stamps


def _save(fig, title: str, path: Path) -> Path:
    """Title, lay out, write a byte-stable PNG, free the figure."""
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata=_PNG_META)
    plt.close(fig)
    return path


def removal_heatmaps(conds: dict[Condition, list[Result]], out_dir: Path) -> list[Path]:
    """One PNG per (grid, model, objective): layers × searchers, one panel per budget."""
    groups: dict[tuple[str | None, str, str], dict[int, list[Result]]] = defaultdict(dict)
    for (grid, model, objective, budget), rows in conds.items():
        groups[(grid, model, objective)][budget] = rows
    written = []
    for (grid, model, objective), budgets in sorted(groups.items()):
        keys = sorted(budgets)
        fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.2), squeeze=False)
        for ax, budget in zip(axes[0], keys):
            rows = sorted(budgets[budget], key=lambda r: searcher_rank(r.identity.search))
            n_layers = rows[0]["n_layers"]
            grid_map = np.zeros((len(rows), n_layers))
            for i, r in enumerate(rows):
                grid_map[i, r["removed"]] = 1
            ax.imshow(grid_map, cmap="Greys", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
            ax.set_yticks(range(len(rows)), [r.identity.search for r in rows], fontsize=8)
            ax.set_xticks(range(0, n_layers, max(1, n_layers // 16)))
            ax.tick_params(axis="x", labelsize=8)
            # a thin line between cells, so that adjacent removed layers still count one by one
            ax.set_xticks(np.arange(-0.5, n_layers, 1), minor=True)
            ax.set_yticks(np.arange(-0.5, len(rows), 1), minor=True)
            ax.grid(which="minor", color="silver", linewidth=0.6)
            ax.tick_params(which="minor", length=0)
            ax.set_xlabel("layer (black = removed)")
            ax.set_title(f"M={budget}", fontsize=9)
        written.append(_save(fig, f"{model} · {objective}", out_dir / f"heatmap-{grid}-{model}-{objective}.png"))
    return written


def avg_acc_interval(r: Result, seed: int = 0) -> tuple[float, float] | None:
    """avg_acc's 95% interval as a share (the report's cluster bootstrap of its items), or None without outcomes."""
    from depthprune.report.intervals import accuracy

    heads: dict[str, str] = ((r.get("evaluation_protocol") or {}).get("zero_shot") or {}).get("headline_metric") or {}
    iv = accuracy(r, list(heads), heads.__getitem__, r["metrics"].get("avg_acc"), seed=seed) if heads else None
    return None if iv is None else (iv.low, iv.high)


def cost_quality(conds: dict[Condition, list[Result]], out_dir: Path, grid: str, seed: int = 0) -> Path | None:
    """Accuracy vs cost as if alone (layer-forwards and seconds, each relative to oneshot's in the
    same condition): one column per budget, rows = the two cost measures; colour = searcher,
    marker = model, filled = ppl objective, hollow = others — never one mixed cloud. Each accuracy
    has its 95% interval as an error bar (cluster bootstrap of the result's items, ``seed``):
    searchers' accuracies a few points apart are often within one another's noise."""
    points: list[tuple[str, str, int, str, float, float, float, tuple[float, float] | None]] = []
    for (g, model, objective, budget), rows in conds.items():
        if g != grid:
            continue
        base = next((r for r in rows if r.identity.search == "oneshot"), None)
        if base is None:
            continue
        for r in rows:
            acc = r["metrics"].get("avg_acc")
            if acc is None:
                continue
            lf = r["cost"]["layer_forwards"] / max(base["cost"]["layer_forwards"], 1)
            sec = r["cost"]["seconds"] / max(base["cost"]["seconds"], 1e-9)
            ci = avg_acc_interval(r, seed)
            points.append((model, objective, budget, r.identity.search, lf, sec, 100 * acc,
                           None if ci is None else (100 * ci[0], 100 * ci[1])))
    if not points:
        return None
    budgets = sorted({p[2] for p in points})
    models = sorted({p[0] for p in points})
    searchers = sorted({p[3] for p in points}, key=searcher_rank)
    colours = {s: plt.cm.tab10(i % 10) for i, s in enumerate(searchers)}
    markers = {m: "osD^vP*X"[i % 8] for i, m in enumerate(models)}
    fig, axes = plt.subplots(2, len(budgets), figsize=(4.6 * len(budgets), 7.0), squeeze=False)
    for col, budget in enumerate(budgets):
        for row, (index, label) in enumerate(((0, "layer-forwards / oneshot's"), (1, "seconds / oneshot's"))):
            ax = axes[row][col]
            for model, objective, b, search, lf, sec, y, ci in points:
                if b != budget:
                    continue
                x = (lf, sec)[index]
                yerr = None if ci is None else [[y - ci[0]], [ci[1] - y]]
                ax.errorbar([x], [y], yerr=yerr, fmt=markers[model], markersize=5,
                            markerfacecolor=colours[search] if objective == "ppl" else "none",
                            markeredgecolor=colours[search], ecolor=colours[search], elinewidth=0.7, capsize=2,
                            alpha=0.85, linestyle="none")
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _pos: f"{v:g}×"))
            ax.xaxis.set_minor_formatter(ticker.NullFormatter())
            ax.axvline(1.0, color="lightgrey", linewidth=0.8, zorder=0)
            ax.set_xlabel(f"{label} (log; as if alone)", fontsize=8)
            ax.set_ylabel("avg zero-shot accuracy (%), 95% CI", fontsize=8)
            ax.set_title(f"M={budget}", fontsize=9)
    by_searcher = [plt.Line2D([], [], color=colours[s], marker="o", linestyle="", label=s) for s in searchers]
    by_shape = [plt.Line2D([], [], color="grey", marker=markers[m], linestyle="", label=m) for m in models]
    by_shape += [plt.Line2D([], [], color="grey", marker="o", linestyle="", label="ppl (filled)"),
                 plt.Line2D([], [], color="grey", marker="o", markerfacecolor="none", linestyle="",
                            label="other objective (hollow)")]
    # below the panels, not on one (a legend inside a panel covered its points): colour = searcher on
    # the first line, marker = model and fill = objective on the second
    for handles, y in ((by_searcher, 0.038), (by_shape, 0.0)):
        fig.legend(handles=handles, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, y), ncol=len(handles),
                   frameon=False, handletextpad=0.3, columnspacing=1.4)
    fig.suptitle(f"cost vs quality per searcher ({grid} grid); cost counted as if each searcher ran alone; "
                 "bars: 95% intervals", fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    path = out_dir / f"cost-quality-{grid}.png"
    fig.savefig(path, dpi=110, metadata=_PNG_META)
    plt.close(fig)
    return path


def _clip_outlier(ax, values: list[float]) -> None:
    """One block far above the rest (the first block of a small model: removing it alone breaks the
    model) flattens every other bar to nothing; clip the axis to the rest and write the clipped
    bar's value on it, so the other blocks' profile can be read."""
    finite = sorted((abs(v), i) for i, v in enumerate(values) if np.isfinite(v))
    if len(finite) < 2 or finite[-2][0] <= 0 or finite[-1][0] < 4 * finite[-2][0]:
        return
    (_, top), rest = finite[-1], [values[i] for _, i in finite[:-1]]
    high, low = max(max(rest), 0.0), min(min(rest), 0.0)
    pad = 0.25 * max(high - low, 1e-12)
    ax.set_ylim(low - (pad if low < 0 else 0), high + pad)
    inside = high + 0.55 * pad if values[top] > 0 else low - 0.55 * pad
    ax.text(top, inside, f"{values[top]:+.2f} ↑" if values[top] > 0 else f"{values[top]:+.2f} ↓",
            ha="center", va="center", fontsize=8, color="white" if values[top] > 0 else "black",
            bbox={"boxstyle": "round,pad=0.15", "facecolor": "tab:blue" if values[top] > 0 else "white",
                  "edgecolor": "none"})
    ax.annotate("axis clipped", xy=(1.0, 1.0), xycoords="axes fraction", ha="right", va="bottom", fontsize=7,
                color="dimgrey")


def single_layer_profiles(dense: dict[tuple[str, str], dict[str, Any]], out_dir: Path) -> list[Path]:
    """Δ calibration loss when block i alone is removed (the shared prior minus the dense loss),
    one PNG per (grid, model), one panel per objective — the single-layer removal profile."""
    written = []
    for (grid, model), d in sorted(dense.items()):
        objectives = {name: o for name, o in sorted(d.get("objectives", {}).items()) if o.get("prior")}
        if not objectives:
            continue
        fig, axes = plt.subplots(len(objectives), 1, figsize=(7.0, 2.2 * len(objectives)), squeeze=False)
        for ax, (name, o) in zip(axes[:, 0], objectives.items()):
            delta = [(p - o["dense_calibration_loss"]) if p is not None else np.nan for p in o["prior"]]
            ax.bar(range(len(delta)), delta, color=["tab:red" if v < 0 else "tab:blue" for v in delta])
            ax.axhline(0.0, color="black", linewidth=0.6)
            _clip_outlier(ax, delta)
            ax.set_xticks(range(0, len(delta), max(1, len(delta) // 15)))
            ax.set_ylabel(f"Δ {name} loss", fontsize=8)
            ax.set_title(f"{name} (dense loss {o['dense_calibration_loss']:.3f})", fontsize=9)
        axes[-1, 0].set_xlabel("block removed alone")
        written.append(_save(fig, f"{model}: single-block removal profile ({grid} grid's calibration)",
                             out_dir / f"single-layer-{grid}-{model}.png"))
    return written
