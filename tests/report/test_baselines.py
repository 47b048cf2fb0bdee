"""REPORT's task-baselines section shows every frozen baseline of every real task, with its interval."""

from __future__ import annotations

import json

from depthprune.report.baselines import BASELINES, render_baselines


def test_every_baseline_of_every_task_is_shown_with_its_interval():
    data = json.loads(BASELINES.read_text(encoding="utf-8"))
    text = "\n".join(render_baselines())
    for task, readers in data["tasks"].items():
        assert task in text
        for name, b in readers.items():
            assert name in text and f"{b['acc']:.3f}\u00a0[{b['lo']:.3f},\u00a0{b['hi']:.3f}]" in text
    worst = max(b["acc"] - b["chance"] for readers in data["tasks"].values() for b in readers.values())
    assert f"{100 * worst:.1f} points above chance" in text


def test_no_file_no_section(tmp_path):
    assert render_baselines(tmp_path / "absent.json") == []
