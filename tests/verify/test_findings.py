"""Findings (depthprune.verify.findings): a failure a fixed rule reported is recognised only as itself."""

from __future__ import annotations

from depthprune.verify.findings import FINDINGS, explaining


def test_a_finding_explains_only_its_own_sets_cell_and_class():
    f = FINDINGS[0]
    own = [frozenset(s) for s in f.sets]
    assert explaining(f.cell, f.recorded, own) is f
    assert explaining(f.cell, f.recorded, own + [frozenset({5})]) is None  # one more set: a failure
    assert explaining(f.cell, f.recorded, []) is None  # nothing failed: nothing to explain
    assert explaining("gemma3-270m-margin-oneshot-M5", f.recorded, own) is None
    assert explaining(f.cell, "fp32/cpu-avx2", own) is None  # recorded in another class


def test_every_finding_names_its_rule_and_what_was_measured():
    for f in FINDINGS:
        assert f.rule >= 5 and f.sets and all(list(s) == sorted(s) for s in f.sets)
        assert "measured" in f.what and "docs/verify.md" in f.what
