"""The real grid's evaluation power rule (cases/real.toml) is what tools/power_rule.py gives on the
committed pairs of pruned solutions (cases/power-rule/), and the case file's limit follows from it."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ROOT / "cases" / "power-rule"


def _tool():
    spec = importlib.util.spec_from_file_location("power_rule", ROOT / "tools" / "power_rule.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("model, discordance, deff, items", [
    ("smollm2", 0.107, 1.13, 1048), ("gemma", 0.203, 1.02, 1807)])
def test_the_case_files_figures_are_the_tools(model, discordance, deff, items):
    a, b = (json.loads((PAIRS / f"{model}-{s}.json").read_text()) for s in ("oneshot", "greedy"))
    row = _tool().measure(a, b, target=3.0, items=1809)
    assert row["items"] == 600 and row["discordance"] == pytest.approx(discordance, abs=5e-4)
    assert row["design_effect"] == pytest.approx(deff, abs=5e-3)
    assert round(row["items_for_target"]) == items
    text = (ROOT / "cases" / "real.toml").read_text()
    assert f"{items:,} items" in text and f"discordance {discordance}" in text


def test_the_limit_pays_for_the_larger_need():
    from depthprune.grid.cases import load_grid

    need = max(1048, 1807)
    grid = load_grid(ROOT / "cases" / "real.toml")
    cfg = grid.eval_config("real")
    assert cfg.limit == math.ceil(need / len(cfg.tasks))  # equal items per task, at least the need
