"""The cluster path: tasks built from a case file, submitted through submitit's local executor on
the cheapest tiny cells, merged by depthprune report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from depthprune.cli import main
from depthprune.grid.cases import load_grid
from depthprune.grid.cluster import make_tasks

ROOT = Path(__file__).resolve().parents[2]

# Two models, one objective, two searchers; tiny calibration and a one-task evaluation, so that
# a task (load, calibrate, prior, oneshot, dense + pruned evaluation) takes seconds on one core.
CASE = """
[grid]
name = "cluster-check"
models = ["tiny-llama3", "tiny-llama3.1"]
objectives = ["ppl", "margin"]
searchers = ["oneshot", "greedy"]
budgets = [3]
device = "cpu"
dtype = "float32"
batch_size = 4

[objective.ppl]
n_samples = 4
seq_len = 32

[objective.margin]
n_items = 4
answer = "cloze"

[evaluation]
tasks = ["arc_easy"]
lambada = false
perplexity = ["c4"]
seq_len = 64
c4_windows = 2
limit = 8
batch_size = 4
"""


@pytest.fixture
def cases(tmp_path):
    d = tmp_path / "cases"
    d.mkdir()
    (d / "check.toml").write_text(CASE)
    return d


def test_one_task_per_model_selects_exactly_that_model(cases, tmp_path):
    grid = load_grid(cases / "check.toml")
    tasks = make_tasks(grid, ROOT, tmp_path / "r", cases)
    assert [t.model for t in tasks] == list(grid.models) and all(t.objective is None for t in tasks)
    cmd = tasks[0].command()
    assert cmd[cmd.index("--model") + 1] == "tiny-llama3"  # exact: not tiny-llama3.1 (as -k would match)
    per_objective = make_tasks(grid, ROOT, tmp_path / "r", cases, per="objective")
    assert [(t.model, t.objective) for t in per_objective] == [(m, o) for m in grid.models for o in grid.objectives]
    with pytest.raises(ValueError, match="allowed: tiny-llama3, tiny-llama3.1"):
        make_tasks(grid, ROOT, tmp_path / "r", cases, models=("tiny-qwen3",))
    with pytest.raises(ValueError, match="not a depthprune checkout"):
        make_tasks(grid, tmp_path, tmp_path / "r", cases)


def _collect(*args: str) -> subprocess.CompletedProcess:
    """``pytest bench/test_grid.py ARGS --collect-only`` in a fresh process, from the checkout."""
    return subprocess.run([sys.executable, "-m", "pytest", "bench/test_grid.py", *args, "--collect-only", "-q",
                           "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True)


def test_bench_refuses_an_unknown_model(cases):
    proc = _collect("--cases", str(cases), "--grid", "cluster-check", "--model", "tiny-qwen3")
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "--model tiny-qwen3" in said and "allowed: tiny-llama3" in said


def test_bench_selects_a_model_that_only_a_cells_block_adds():
    """real.toml's [grid] names smollm2-135m; gemma3-270m comes from its [[cells]] blocks. Both are selectable."""
    def collect(model):
        return _collect("--grid", "real", "--full-grid", "--model", model)

    proc = collect("gemma3-270m")
    ids = [line for line in proc.stdout.splitlines() if "test_cell[" in line]
    assert proc.returncode == 0 and len(ids) == 42 and all("gemma3-270m-" in i for i in ids), proc.stdout[-2000:]
    proc = collect("llama3-8b")
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "allowed: gemma3-270m, smollm2-135m" in said


def test_submit_usage_errors(cases, tmp_path, capsys):
    base = ["submit", "--cases", str(cases), "--results", str(tmp_path / "r")]
    assert main([*base, "--grid", "nope"]) == 2
    assert "--grid nope" in capsys.readouterr().err
    assert main([*base, "--grid", "cluster-check", "--model", "tiny-qwen3"]) == 2
    assert "tiny-qwen3" in capsys.readouterr().err
    assert main([*base, "--grid", "cluster-check", "--report", str(tmp_path / "R.md")]) == 2
    assert "--report needs --wait" in capsys.readouterr().err


def test_local_executor_runs_tasks_and_report_merges(cases, tmp_path, capsys):
    pytest.importorskip("submitit")
    results, refs = tmp_path / "results", tmp_path / "refs"
    code = main(["submit", "--grid", "cluster-check", "--cases", str(cases), "--results", str(results),
                 "--repo", str(ROOT), "--executor", "local", "--objective", "ppl", "-k", "oneshot",
                 "--gpus-per-task", "0", "--timeout-min", "10", "--wait", "--report", str(tmp_path / "REPORT.md"),
                 "--", "--update-reference", "--reference-dir", str(refs)])
    out = capsys.readouterr().out
    assert code == 0, out
    grid = load_grid(cases / "check.toml")
    wanted = {c.id for c in grid.cells() if c.objective == "ppl" and c.search == "oneshot"}
    written = {p.stem for p in (results / "cluster-check").glob("*.json")}
    assert written == wanted  # both models' tasks ran, and only the selected cells
    for cell in wanted:
        result = json.loads((results / "cluster-check" / f"{cell}.json").read_text())
        assert result["cell"] == cell and len(result["removed"]) == 3
    for model in grid.models:
        assert f"cluster-check/{model}/ppl" in out  # one task per model and objective, each reported
    report = (tmp_path / "REPORT.md").read_text()
    assert all(model in report for model in grid.models)  # the report merged both tasks' results


def test_a_task_runs_its_pytest_with_as_many_threads_as_its_cpus(cases, tmp_path):
    """torch sizes its pool by the cores it sees; the local executor shows each task all of them."""
    grid = load_grid(cases / "check.toml")
    task = make_tasks(grid, ROOT, tmp_path / "r", cases, threads=3)[0]
    assert task.environment({"PATH": "/bin"}) == {"PATH": "/bin", "DEPTHPRUNE_THREADS": "3", "OMP_NUM_THREADS": "3"}
    assert task.environment({"DEPTHPRUNE_THREADS": "1"})["DEPTHPRUNE_THREADS"] == "1"  # the user's setting wins
    assert make_tasks(grid, ROOT, tmp_path / "r", cases)[0].environment({}) == {}


def test_local_tasks_share_this_machines_cores(monkeypatch):
    from depthprune.cli import grid as cli

    monkeypatch.setattr(cli.os, "cpu_count", lambda: 16)
    assert cli.task_threads("slurm", 8, 3) == 8  # a node's CPUs are the task's own
    assert cli.task_threads("local", 8, 3) == 5
    assert cli.task_threads("local", 2, 3) == 2
    assert cli.task_threads("debug", 8, 40) == 1
