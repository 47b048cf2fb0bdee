"""REPORT's task baselines: what model-free readers of an item score on each real task, beside chance.

A task measures the model only if readers that see no model (option length, position, lexical
overlap, word frequency, TF-IDF, an option-only classifier, an n-gram model) stay near chance. The
numbers are the frozen ``baselines.json`` the task builder wrote (``python -m depthprune.real.mc_tasks
build``), with their intervals; this module only shows them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tabulate import tabulate

from depthprune.models import REAL_ASSETS

BASELINES = REAL_ASSETS / "tasks" / "mc" / "baselines.json"


def _cell(b: dict[str, Any]) -> str:
    return f"{b['acc']:.3f}\u00a0[{b['lo']:.3f},\u00a0{b['hi']:.3f}]"


def render_baselines(path: Path = BASELINES) -> list[str]:
    if not path.is_file():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    tasks = sorted(data["tasks"])
    readers = sorted({r for t in tasks for r in data["tasks"][t]})
    rows = [[r, *(_cell(data["tasks"][t][r]) if r in data["tasks"][t] else "–" for t in tasks)] for r in readers]
    chance = {data["tasks"][t][readers[0]]["chance"] for t in tasks}
    worst = max((data["tasks"][t][r]["acc"] - data["tasks"][t][r]["chance"], t, r)
                for t in tasks for r in data["tasks"][t])
    return [
        f"The real profile's WordNet tasks ({data['split']} splits, {data['interval']}), read by baselines that see no "
        f"model; chance {', '.join(f'{c:.2f}' for c in sorted(chance))}. The highest is {worst[2]} on {worst[1]}, "
        f"{100 * worst[0]:.1f} points above chance. Source: the package's `{path.relative_to(REAL_ASSETS.parents[2])}`.", "",
        tabulate(rows, headers=["baseline", *tasks], tablefmt="github", disable_numparse=True), ""]
