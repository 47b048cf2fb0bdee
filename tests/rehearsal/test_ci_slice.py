"""The rehearsal's CI slice, as one test of the suite: ``depthprune rehearsal run`` in a child process, as
``tox -e rehearsal`` runs it, on the paper cells of ``cases/rehearsal/ci.toml`` against stand-ins built for it.

A child process because the stand-ins' environment (``HF_HOME``, offline flags) must be set before
huggingface_hub is imported (:func:`depthprune.rehearsal.command.rehearse`). A test of the suite, not a second
tox command after it, because there it ran alone after both workers had finished: ~67 s of CI's wall time on
2 threads (`.ci/run` capped to AVX2 at 0409952), where here it is one worker's task on that worker's one thread
while the other worker runs the rest (docs/measurements.md).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def test_the_ci_slice_of_the_paper_grid_rehearses_on_stand_ins(tmp_path):
    # the child is a plain pytest run, not a worker of this one: xdist's and pytest's own variables stay here
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["DEPTHPRUNE_THREADS"] = str(torch.get_num_threads())  # this worker's share of the cores
    cmd = [sys.executable, "-m", "depthprune.cli", "rehearsal", "run", "--out", str(tmp_path / "stand-ins"), "--",
           "--rehearsal-results", str(tmp_path / "results-rehearsal"), "-p", "no:cacheprovider", "-q"]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-8000:]
    summary = run.stdout.strip().splitlines()[-1]  # pytest's last line (stderr holds the builders' progress)
    # pytest exits 0 when every test skips: the slice's cells must have run (stand-ins found), none skipped
    passed = re.search(r"\b(\d+) passed\b", summary)
    assert passed and int(passed.group(1)) >= 3 and "skipped" not in summary, out[-8000:]
    assert "stand-ins built in" in out, out[-4000:]
