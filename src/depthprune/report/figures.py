"""Figures for REPORT.md (matplotlib, PNG): removal heatmaps and cost vs quality.

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

from depthprune.report.analysis import Condition, searcher_rank  # noqa: E402

_PNG_META = {"Software": None}  # keep files byte-stable across matplotlib versions' stamps


def removal_heatmaps(conds: dict[Condition, list[dict[str, Any]]], out_dir: Path) -> list[Path]:
    """One PNG per (grid, model, objective): layers × searchers, one panel per budget."""
    groups: dict[tuple[str, str, str], dict[int, list[dict[str, Any]]]] = defaultdict(dict)
    for (grid, model, objective, budget), rows in conds.items():
        groups[(grid, model, objective)][budget] = rows
    written = []
    for (grid, model, objective), budgets in sorted(groups.items()):
        keys = sorted(budgets)
        fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.2), squeeze=False)
        for ax, budget in zip(axes[0], keys):
            rows = sorted(budgets[budget], key=lambda r: searcher_rank(r["search"]))
            n_layers = rows[0]["n_layers"]
            grid_map = np.zeros((len(rows), n_layers))
            for i, r in enumerate(rows):
                grid_map[i, r["removed"]] = 1
            ax.imshow(grid_map, cmap="Greys", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
            ax.set_yticks(range(len(rows)), [r["search"] for r in rows], fontsize=8)
            ax.set_xticks(range(0, n_layers, max(1, n_layers // 8)))
            ax.set_xlabel("layer (black = removed)")
            ax.set_title(f"M={budget}", fontsize=9)
        fig.suptitle(f"{model} · {objective}", fontsize=10)
        fig.tight_layout()
        path = out_dir / f"heatmap-{grid}-{model}-{objective}.png"
        fig.savefig(path, dpi=110, metadata=_PNG_META)
        plt.close(fig)
        written.append(path)
    return written


def cost_quality(conds: dict[Condition, list[dict[str, Any]]], out_dir: Path, grid: str) -> Path | None:
    """Accuracy (avg_acc) vs search evaluations, one point per cell, one panel per objective."""
    per_obj: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (g, _model, objective, _budget), rows in conds.items():
        if g == grid:
            per_obj[objective].extend(r for r in rows if r["metrics"].get("avg_acc") is not None)
    if not per_obj:
        return None
    searchers = sorted({r["search"] for rows in per_obj.values() for r in rows}, key=searcher_rank)
    colours = {s: plt.cm.tab10(i % 10) for i, s in enumerate(searchers)}
    fig, axes = plt.subplots(1, len(per_obj), figsize=(5 * len(per_obj), 3.6), squeeze=False)
    for ax, (objective, rows) in zip(axes[0], sorted(per_obj.items())):
        for s in searchers:
            pts = [(max(r["cost"]["evaluations"], 1), 100 * r["metrics"]["avg_acc"]) for r in rows if r["search"] == s]
            if pts:
                x, y = zip(*pts)
                ax.scatter(x, y, color=colours[s], label=s, s=22)
        ax.set_xscale("log")
        ax.set_xlabel("search evaluations (log)")
        ax.set_ylabel("avg zero-shot accuracy (%)")
        ax.set_title(f"objective: {objective}", fontsize=10)
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.suptitle(f"cost vs quality per searcher ({grid} grid)", fontsize=10)
    fig.tight_layout()
    path = out_dir / f"cost-quality-{grid}.png"
    fig.savefig(path, dpi=110, metadata=_PNG_META)
    plt.close(fig)
    return path
