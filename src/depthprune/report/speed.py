"""What pruning buys: each pruned model's measured speedup against the accuracy it keeps.

A grid's speed archive (``speed-<grid>.json`` beside its results, written by ``depthprune speed --results
DIR --grid NAME``) times each distinct removed set once, on the machine it records; :func:`attach` gives
every result of that grid its set's measurement as ``speed`` (the inference-cost claim reads it). The page
and the figure put, per model, each cell's accuracy retained (its avg accuracy ÷ the dense model's, with
the 95% interval of its items) against its measured prefill speedup (the interquartile range of the timing
rounds), and mark the Pareto front: the cells no other cell beats on both. The question they answer: which
objective and searcher buy the most speed per accuracy point lost.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from depthprune.common.jsonio import read_json
from depthprune.report.cells import table
from depthprune.report.claims.cost import WORKLOADS
from depthprune.report.claims.helpers import median
from depthprune.report.figures import avg_acc_interval
from depthprune.results.schema import Result

#: the speed archive's format (depthprune.speed.cells)
SPEED_SCHEMA = "depthprune-speed-grid/1"


def read_speed(dirs: Iterable[str | Path]) -> dict[tuple[str, str, tuple[int, ...]], dict[str, Any]]:
    """(grid, model, removed set) -> its measured row, from every ``speed-*.json`` grid archive in ``dirs``."""
    out: dict[tuple[str, str, tuple[int, ...]], dict[str, Any]] = {}
    for d in dirs:
        for path in sorted(Path(d).glob("speed-*.json")):
            data = read_json(path)
            if data.get("schema") != SPEED_SCHEMA:
                continue  # a single run's record (depthprune speed --json), not a grid's archive
            for row in data["sets"]:
                out[(data["grid"], row["model"], tuple(sorted(row["removed"])))] = {
                    **row, "machine": data.get("machine"), "source": path.name}
    return out


def attach(results: Sequence[Result], speed: Mapping[tuple[str, str, tuple[int, ...]], dict[str, Any]]
           ) -> list[Result]:
    """``results`` with each measured cell's ``speed`` (a copy; the others as they are)."""
    if not speed:
        return list(results)
    out = []
    for r in results:
        row = speed.get((str(r.identity.grid), r.identity.model, tuple(sorted(r["removed"]))))
        out.append(r.replace(speed=row) if row is not None else r)
    return out


def _prefill(r: Mapping[str, Any]) -> dict[str, Any] | None:
    prefix = WORKLOADS["prefill"]
    return next((v["speedup"] for k, v in ((r.get("speed") or {}).get("measured") or {}).items()
                 if k.startswith(prefix)), None)


def points(results: Sequence[Result], dense: Mapping[tuple[str, str], Mapping[str, Any]],
           grid: str) -> list[dict[str, Any]]:
    """One point per measured, evaluated cell of ``grid``: speedup (median, q1, q3) and accuracy retained
    (%, its 95% bounds those of its accuracy scaled by the dense model's)."""
    out = []
    for r in results:
        s = _prefill(r)
        acc = (r.get("metrics") or {}).get("avg_acc")
        base = ((dense.get((grid, r.identity.model)) or {}).get("metrics") or {}).get("avg_acc")
        if r.identity.grid != grid or s is None or acc is None or not base:
            continue
        ci = avg_acc_interval(r)
        out.append({"cell": r["cell"], "model": r.identity.model, "objective": r.identity.objective,
                    "search": r.identity.search,
                    "budget": r.identity.budget, "speedup": s["median"], "q1": s["q1"], "q3": s["q3"],
                    "retained": 100 * acc / base,
                    "low": None if ci is None else 100 * ci[0] / base, "high": None if ci is None else 100 * ci[1] / base,
                    "blocks_only": r["speed"]["predicted"]["blocks_only"]})
    for p in out:
        p["front"] = not any(q is not p and q["model"] == p["model"] and q["speedup"] >= p["speedup"]
                             and q["retained"] >= p["retained"]
                             and (q["speedup"] > p["speedup"] or q["retained"] > p["retained"]) for q in out)
    return out


def figure(pts: Sequence[dict[str, Any]], out_dir: Path, grid: str) -> Path | None:
    """Accuracy retained against measured prefill speedup, a panel per model, the Pareto front joined."""
    if not pts:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted({p["model"] for p in pts})
    searchers = sorted({p["search"] for p in pts})
    colours = {s: plt.cm.tab10(i % 10) for i, s in enumerate(searchers)}
    fig, axes = plt.subplots(1, len(models), figsize=(4.6 * len(models), 4.2), squeeze=False)
    for ax, model in zip(axes[0], models):
        mine = [p for p in pts if p["model"] == model]
        for p in mine:
            yerr = None if p["low"] is None else [[p["retained"] - p["low"]], [p["high"] - p["retained"]]]
            ax.errorbar([p["speedup"]], [p["retained"]], xerr=[[p["speedup"] - p["q1"]], [p["q3"] - p["speedup"]]],
                        yerr=yerr, fmt="o" if p["objective"] == "ppl" else "s", markersize=4,
                        markerfacecolor=colours[p["search"]] if p["objective"] == "ppl" else "none",
                        markeredgecolor=colours[p["search"]], ecolor=colours[p["search"]], elinewidth=0.6,
                        capsize=2, alpha=0.85, linestyle="none")
        front = sorted((p for p in mine if p["front"]), key=lambda p: p["speedup"])
        ax.plot([p["speedup"] for p in front], [p["retained"] for p in front], color="black", linewidth=0.8,
                linestyle="--", label="Pareto front")
        for m in sorted({p["budget"] for p in mine}):
            ax.axvline(next(p["blocks_only"] for p in mine if p["budget"] == m), color="lightgrey", linewidth=0.8,
                       zorder=0)
        ax.set_title(model, fontsize=9)
        ax.set_xlabel("measured prefill speedup (rebuilt model; bars: rounds' IQR); grey: L/(L−M)", fontsize=7)
        ax.set_ylabel("accuracy retained (% of dense), 95% CI", fontsize=8)
    handles = [plt.Line2D([], [], color=colours[s], marker="o", linestyle="", label=s) for s in searchers]
    handles += [plt.Line2D([], [], color="grey", marker="o", linestyle="", label="ppl (filled)"),
                plt.Line2D([], [], color="grey", marker="s", markerfacecolor="none", linestyle="",
                           label="margin (hollow)"),
                plt.Line2D([], [], color="black", linestyle="--", label="Pareto front")]
    fig.legend(handles=handles, fontsize=7, loc="lower center", ncol=len(handles), frameon=False)
    fig.suptitle(f"what pruning buys ({grid} grid): accuracy retained vs measured speedup", fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    path = out_dir / f"speed_accuracy_{grid}.png"
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def _ci(p: Mapping[str, Any]) -> str:
    return f"{p['retained']:.1f}" + ("" if p["low"] is None else f" [{p['low']:.1f}, {p['high']:.1f}]")


def by_recipe(pts: Sequence[dict[str, Any]]) -> list[list[Any]]:
    """Per objective × searcher: cells, median speedup, median accuracy retained, cells on the front."""
    rows = []
    for objective, search in sorted({(p["objective"], p["search"]) for p in pts}):
        mine = [p for p in pts if (p["objective"], p["search"]) == (objective, search)]
        rows.append([objective, search, len(mine), f"{median(p['speedup'] for p in mine):.3f}",
                     f"{median(p['retained'] for p in mine):.1f}", sum(p["front"] for p in mine)])
    return rows


INTRO = ("Each cell's pruned model is the rebuilt smaller model, timed against the dense one in alternating rounds on "
         "the machine named (`depthprune speed --results DIR --grid NAME`, each distinct removed set once): its prefill "
         "speedup at batch 1 and the long context is the median of the rounds, with their interquartile range. Its "
         "accuracy retained is its avg accuracy ÷ the dense model's, with the 95% interval of its items. A cell is on "
         "the Pareto front when no cell of the same model is both faster and more accurate. L/(L−M) is what the "
         "blocks alone predict.")

RECIPE_HEADERS = ["objective", "searcher", "cells", "median speedup", "median accuracy retained (%)",
                  "on the Pareto front"]


def page(grids: Mapping[str, Sequence[dict[str, Any]]], machines: Mapping[str, str]) -> list[str]:
    """Every measured cell of every grid: speedup against accuracy retained."""
    lines = [INTRO, ""]
    for grid, pts in grids.items():
        lines += [f"## Grid `{grid}`", "", f"Measured on: {machines.get(grid, 'unknown')}.", "",
                  table(by_recipe(pts), RECIPE_HEADERS), "",
                  table([[p["model"], p["objective"], p["budget"], p["search"],
                          f"{p['speedup']:.3f} [{p['q1']:.3f}, {p['q3']:.3f}]", f"{p['blocks_only']:.3f}", _ci(p),
                          "yes" if p["front"] else ""] for p in sorted(
                              pts, key=lambda p: (p["model"], p["budget"], p["objective"], p["search"]))],
                        ["model", "objective", "M", "searcher", "prefill speedup [IQR]", "L/(L−M)",
                         "accuracy retained (%)", "Pareto front"]), ""]
    return lines


def machine_line(speed: Mapping[tuple[str, str, tuple[int, ...]], Mapping[str, Any]], grid: str) -> str:
    """The CPU (or GPU) and precision a grid's speed archive was measured on, in words."""
    row = next((v for k, v in speed.items() if k[0] == grid), None)
    m = (row or {}).get("machine") or {}
    cpu = (m.get("cpu") or {}).get("model_name") or m.get("device") or "unknown"
    kernels = m.get("kernels") or {}
    return (f"{cpu}, {m.get('dtype', '?')}, capability "
            f"{kernels.get('capability', '?')}, AMX {'yes' if kernels.get('amx_tile') else 'no'} "
            f"({(row or {}).get('source', '?')})")
