"""REPORT's task baselines: what model-free readers of an item score on each real task, beside chance.

A task measures the model only if readers that see no model (option length, position, lexical
overlap, word frequency, TF-IDF, an option-only classifier, an n-gram model) stay near chance. The
numbers are the frozen ``baselines.json`` the task builder wrote (``depthprune build
wordnet-tasks``), with their intervals; this module only shows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from depthprune.common.jsonio import read_json
from depthprune.common.text_tables import markdown_table
from depthprune.model.registry import REAL_ASSETS
from depthprune.report.cells import table

BASELINES = REAL_ASSETS / "tasks" / "mc" / "baselines.json"


def _cell(b: Mapping[str, Any]) -> str:
    return f"{b['acc']:.3f}\u00a0[{b['lo']:.3f},\u00a0{b['hi']:.3f}]"


def render_baselines(path: Path = BASELINES) -> list[str]:
    if not path.is_file():
        return []
    data = read_json(path)
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
        markdown_table(rows, ["baseline", *tasks]), ""]


def _above(b: Mapping[str, Any]) -> str:
    return f"{100 * (b['acc'] - b['chance']):+.1f}"


def _leaks(b: dict[str, Any]) -> bool:
    """A reader whose 95% interval lies wholly above chance: the text alone beats chance."""
    return b["lo"] > b["chance"]


def render_task_baselines(path: Path | None = None) -> tuple[list[str], list[str]]:
    """(REPORT's lines, the page's lines) for every other shipped task's model-free baselines
    (:mod:`depthprune.builders.task_baselines`' frozen file): REPORT a row per task with its best reader, the page
    every reader."""
    from depthprune.builders.task_baselines import FROZEN, best, chance

    path = FROZEN if path is None else path
    if not path.is_file():
        return [], []
    data = read_json(path)
    tasks = data["tasks"]
    order = sorted(tasks, key=lambda t: (tasks[t]["profile"], t))
    rows, leaking = [], []
    for name in order:
        t = tasks[name]
        reader, b = best(t["readers"])
        above = [r for r, v in sorted(t["readers"].items()) if _leaks(v)]
        if above:
            leaking.append(f"{name} ({', '.join(above)})")
        rows.append([name, t["profile"], t["kind"].replace("_", " "), f"{t['split']}, {b['n']}", f"{b['chance']:.3f}",
                     reader, _cell(b), _above(b), f"{len(above)} of {len(t['readers'])}"])
    source = f"`{path.relative_to(REAL_ASSETS.parents[2])}` (`{data['generated_by']}`, lm-eval {data['lm_eval']})"
    head = [
        f"Every other shipped task, read through lm-eval's own task definitions ({data['interval']}); multiple choice "
        "by the corpus-free readers above, open cloze (LAMBADA) by copy readers of the passage (Paperno et al. 2016), "
        f"whose chance is a random word of the task's vocabulary. Source: {source}. Readers whose interval lies wholly "
        "above chance (each at 95%, not corrected for the 4-10 readers of a task): "
        f"{'; '.join(leaking) + '.' if leaking else 'none.'}", "",
        table(rows, headers=["task", "profile", "kind", "split, n", "chance", "best reader", "its accuracy [95%]",
                             "+points", "above chance"]), "",
        "(+points: the best reader's accuracy minus chance, in points; above chance: how many of the task's readers "
        "have a 95% interval wholly above chance.)", ""]
    page = [f"Source: {source}; {data['interval']}.", ""]
    for name in order:
        t = tasks[name]
        page += [f"## {name}", "", f"{t['kind'].replace('_', ' ')}, {t['split']} split; chance "
                 f"{chance(t['readers']):.3f}.", "",
                 markdown_table([[r, _cell(v), _above(v)] for r, v in sorted(t["readers"].items())], ["reader", "accuracy [95%]", "points above chance"]), ""]
    return head, page
