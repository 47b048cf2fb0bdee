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


def _check(status: str, failed: list, turned: int = 0, second=None):
    from depthprune.verify.remeasure import CellCheck

    f = FINDINGS[0]
    c = CellCheck("real", f.cell, "gemma3-270m", "margin", f.recorded, "fp32/cpu-avx512", replay=None, status=status)
    c.failed_sets, c.turned, c.second = [frozenset(s) for s in failed], turned, second
    return c


def test_a_verify_check_is_the_finding_only_when_it_fails_on_its_sets_alone():
    from depthprune.verify.findings import finding_of
    from depthprune.verify.remeasure import FAILED, VERIFIED

    assert finding_of(_check(FAILED, [(1,)])) is FINDINGS[0]
    # a second opinion that failed too (on bands of its class measured on other kernels) adds no failure
    assert finding_of(_check(FAILED, [(1,)], second=_check(FAILED, [(1,), (3,)]))) is FINDINGS[0]
    assert finding_of(_check(FAILED, [(1,)], turned=1)) is None  # a decision turned beyond its band: a failure
    assert finding_of(_check(FAILED, [(1,), (2,)])) is None
    assert finding_of(_check(VERIFIED, [])) is None
