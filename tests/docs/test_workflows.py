"""The GPU workflow is valid GitHub Actions (actionlint, with shellcheck on its scripts) and runs
what users run, over every model of the paper grid."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from depthprune.grid.cases import load_grid

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "gpu-grid.yml"
CONFIG = ROOT / ".github" / "actionlint.yaml"


def _tool(name: str) -> str | None:
    """An executable on PATH or beside this interpreter (pip puts wheels' binaries there)."""
    beside = Path(sys.executable).parent / name
    return shutil.which(name) or (str(beside) if beside.is_file() else None)


def _actionlint(path: Path) -> subprocess.CompletedProcess:
    exe = _tool("actionlint")
    if exe is None:
        pytest.skip("actionlint is not installed (pip install 'depthprune[test]' installs it)")
    env = None
    shellcheck = _tool("shellcheck")
    if shellcheck is not None:  # actionlint runs shellcheck on run: scripts when it finds it on PATH
        import os

        env = {**os.environ, "PATH": f"{Path(shellcheck).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([exe, "-no-color", "-config-file", str(CONFIG), str(path)], cwd=ROOT, capture_output=True,
                          text=True, env=env)


def test_actionlint_finds_nothing():
    proc = _actionlint(WORKFLOW)
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def test_actionlint_would_catch_a_broken_workflow(tmp_path):
    """The check can fail: an unknown runner label, a matrix key that does not exist, an unquoted variable."""
    text = WORKFLOW.read_text()
    broken = (text.replace("runs-on: [self-hosted, linux, gpu]", "runs-on: [self-hosted, linux, tpu]")
              .replace("results-${{ matrix.model }}", "results-${{ matrix.modle }}"))
    assert broken != text
    bad = tmp_path / ".github" / "workflows" / "gpu-grid.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(broken)
    proc = _actionlint(bad)
    assert proc.returncode != 0
    assert "tpu" in proc.stdout and "modle" in proc.stdout


def _workflow() -> dict:
    data = yaml.safe_load(WORKFLOW.read_text())
    return data


def test_matrix_covers_every_model_of_the_paper_grid():
    grid = load_grid(ROOT / "cases" / "paper.toml")
    matrix = _workflow()["jobs"]["grid"]["strategy"]["matrix"]["model"]
    assert sorted(matrix) == sorted(grid.models), "one job per model of cases/paper.toml, no other"


def test_jobs_run_what_users_run():
    wf = _workflow()
    grid_job, report_job = wf["jobs"]["grid"], wf["jobs"]["report"]
    assert {"self-hosted", "gpu"} <= set(grid_job["runs-on"])
    scripts = "\n".join(step.get("run", "") for step in grid_job["steps"])
    assert "tox -e full-grid -- " in scripts and '--model "$MODEL"' in scripts
    assert any(step.get("env", {}).get("MODEL") == "${{ matrix.model }}" for step in grid_job["steps"])
    uploads = [s for s in grid_job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert uploads and {"results/paper/", "REPORT.md"} <= set(uploads[0]["with"]["path"].split())
    # weights from the cache volume, never the network
    assert {"HF_HOME", "DEPTHPRUNE_MODELS_DIR"} <= set(wf["env"]) and wf["env"]["HF_HUB_OFFLINE"] == "1"
    # the merge job: every model's artifact, then the reporter through tox, then REPORT.md uploaded
    assert report_job["needs"] == "grid"
    steps = report_job["steps"]
    downloads = [s for s in steps if str(s.get("uses", "")).startswith("actions/download-artifact@")]
    assert downloads and downloads[0]["with"]["pattern"] == "results-*"
    assert "tox -e report -- --results " + downloads[0]["with"]["path"] in "\n".join(s.get("run", "") for s in steps)
    assert any("REPORT.md" in str(s.get("with", {}).get("path", "")) for s in steps
               if str(s.get("uses", "")).startswith("actions/upload-artifact@"))


def test_tox_has_the_environments_the_workflow_runs():
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    text = WORKFLOW.read_text()
    for env in ("full-grid", "report"):
        assert f"tox -e {env}" in text and tox.has_section(f"testenv:{env}")
    assert "{posargs}" in tox["testenv:full-grid"]["commands"]  # so that --model reaches pytest
    assert "--grid paper" in tox["testenv:full-grid"]["commands"]
