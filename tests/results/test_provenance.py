"""What a result records of where it ran: the git revision, and the code fingerprint's allowlist of the rooms that
can change a result."""

from __future__ import annotations

import subprocess

from depthprune.results import provenance


def test_git_revision_is_dirty_only_for_changes_under_its_tree(tmp_path):
    """A run's own outputs (references, REPORT.md) beside the package leave the revision clean; a change
    to the package's files marks it +dirty."""
    from depthprune.results.provenance import git_revision

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "code.py").write_text("x = 1\n")
    (tmp_path / "REPORT.md").write_text("old\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    clean = git_revision(tmp_path / "pkg")
    assert len(clean) == 40 and not clean.endswith("+dirty")
    (tmp_path / "REPORT.md").write_text("new\n")
    assert git_revision(tmp_path / "pkg") == clean
    (tmp_path / "pkg" / "code.py").write_text("x = 2\n")
    assert git_revision(tmp_path / "pkg") == clean + "+dirty"


def test_the_code_fingerprint_hashes_the_rooms_that_compute_a_result_and_nothing_else():
    files = {p.relative_to(provenance._PACKAGE_ROOT).as_posix() for p in provenance._result_affecting_files()}
    for computes in ("recipe.py", "scoring/scorer.py", "model/masking.py", "objectives/ppl.py", "search/greedy.py",
                     "evaluation/evaluate.py", "data/sources.py", "grid/runner.py", "results/schema.py"):
        assert computes in files, computes
    for presents in ("report/__init__.py", "cli/__init__.py", "verify/bands.py", "grid/cases.py", "plan/shapes.py",
                     "results/provenance.py", "results/store.py"):
        assert presents not in files, presents
    assert any(f.startswith("assets/tiny/") for f in files)
    assert not any("/models/" in f for f in files if f.startswith("assets/"))  # weights: model/weights.py
    assert len(provenance.code_fingerprint()) == 16
