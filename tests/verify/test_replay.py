"""Replay (``depthprune verify --replay-only``): every archived cell, edits that must fail, bad input.

The archives are the committed ones (archive/*.jsonl.xz): 348 cells of the tiny, controls and real
grids. Each searcher runs again on its cell's recorded trace with no model; the deterministic ones
must replay whole, and the two that read more than scores say which part they could not replay.
"""

from __future__ import annotations

import copy
import json
import lzma
from pathlib import Path

import pytest

from depthprune.cli import main
from depthprune.results.schema import to_json
from depthprune.verify.replay import FAILED, PARTIAL, REPLAYED, replay
from depthprune.verify.run import select_cells

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = ROOT / "archive"


@pytest.fixture(scope="module")
def archived() -> list[dict]:
    return select_cells([ARCHIVE])


def test_every_archived_cell_replays(archived):
    outcomes = [replay(r) for r in archived]
    assert len(outcomes) == 348
    failed = [f"{o.cell}: {o.disagreement}" for o in outcomes if o.status == FAILED]
    assert not failed, failed
    partial = {o.searcher for o in outcomes if o.status == PARTIAL}
    # what these archives do not record: cbo's energy and bo's GP fits (recorded since)
    assert partial <= {"bo", "cbo"}, partial
    for o in outcomes:
        if o.status == PARTIAL:
            assert ("energy" in o.not_replayed) if o.searcher == "cbo" else ("GP fits" in o.not_replayed)
    replayed = {o.searcher for o in outcomes if o.status == REPLAYED}
    assert replayed == {"oneshot", "greedy", "beam", "ga", "fbs", "exhaustive", "random", "rank", "bi"}
    # a final decision per answer: a minimiser's answer is no worse than its closest rival
    for o in outcomes:
        final = [d for d in o.decisions if d.kind == "final"]
        assert len(final) <= 1, o.cell
        if o.searcher not in ("rank", "bi"):  # rank picks a quantile, bi ranks by Block Influence
            assert all(d.chosen_loss <= d.rival_loss for d in final), o.cell


def _cell(archived, searcher: str, grid: str = "tiny") -> dict:
    """An archived cell's stored form, a copy to edit."""
    found = next(r for r in archived if r.identity.search == searcher and r.identity.grid == grid)
    return copy.deepcopy(to_json(found))


def test_an_edited_removed_set_fails(archived):
    r = _cell(archived, "greedy")
    kept = next(i for i in range(r["n_layers"]) if i not in r["removed"])
    r["removed"] = sorted([*r["removed"][1:], kept])
    out = replay(r)
    assert out.status == FAILED and "removed" in out.disagreement


def test_an_edited_loss_fails(archived):
    r = _cell(archived, "oneshot")
    r["calibration_loss"] += 1e-6
    out = replay(r)
    assert out.status == FAILED and "loss" in out.disagreement


def test_an_edited_decisive_trace_loss_fails(archived):
    """Greedy's first step made another choice: it then asks for sets the trace does not hold."""
    r = _cell(archived, "greedy")
    first = [e for e in r["trace"] if len(e[0]) == 1]
    best = min(first, key=lambda e: e[1])
    best[1] = max(e[1] for e in first) + 1.0
    out = replay(r)
    assert out.status == FAILED and out.disagreement.startswith("evaluation ")


def test_decisions_carry_gaps(archived):
    r = _cell(archived, "greedy")
    out = replay(r)
    steps = [d for d in out.decisions if d.kind == "step"]
    assert len(steps) == r["identity"]["budget"]  # one batch per greedy step
    assert all(d.gap >= 0 for d in steps)
    assert steps[-1].chosen == tuple(r["removed"])


def _archive(tmp_path: Path, results: list[dict]) -> Path:
    out = tmp_path / "archive"
    out.mkdir()
    lines = "".join(json.dumps({"kind": "result", "name": f"{r['cell']}.json", "data": r}, sort_keys=True) + "\n"
                    for r in results)
    (out / "tiny.jsonl.xz").write_bytes(lzma.compress(lines.encode()))
    return out


def test_cli_names_the_failed_cell_and_exits_1(archived, tmp_path, capsys):
    good, bad = _cell(archived, "oneshot"), _cell(archived, "beam")
    bad["calibration_loss"] -= 0.5
    out = _archive(tmp_path, [good, bad])
    report = tmp_path / "verify.json"
    assert main(["verify", "--results", str(out), "--replay-only", "--json", str(report)]) == 1
    printed = capsys.readouterr().out
    assert f"FAILED  tiny/{bad['cell']}" in printed and good["cell"] not in printed.split("|")[0]
    data = json.loads(report.read_text())
    assert data["counts"] == {"replayed": 1, "partial": 0, "failed": 1}


@pytest.mark.parametrize("args, message", [
    (["--replay-only", "--cell", "tiny-llama3-ppl-greedy-M4"], "--cell tiny-llama3-ppl-greedy-M4: no such cell"),
    (["--replay-only", "--grid", "paper"], "--grid paper: --results"),
    ([], "qwen3-8b (cells tiny-llama3-margin-oneshot-M3): its weights are not on this machine"),
])
def test_cli_bad_selection_exits_2_before_replaying(archived, tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.delenv("DEPTHPRUNE_MODELS_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cell = _cell(archived, "oneshot")
    cell["identity"]["model"] = "qwen3-8b"  # a model whose weights this machine lacks
    out = _archive(tmp_path, [cell])
    report = tmp_path / "verify.json"
    assert main(["verify", "--results", str(out), *args, "--json", str(report)]) == 2
    assert message in capsys.readouterr().err
    assert not report.exists()


def test_bench_verify_refuses_a_model_no_archived_cell_has():
    """``pytest bench --verify --model <typo>`` would select no cell and pass: a usage error instead."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "bench" / "test_verify.py"), "--verify",
                           "--grid", "tiny", "--model", "tiny-llama", "--collect-only", "-q", "-n", "0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr  # collection interrupted: no test ran
    assert "--model tiny-llama: no archived cell of the selected grids has it; allowed: tiny-llama3," in done.stdout
