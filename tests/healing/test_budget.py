"""The budget rule as first written, kept to say what the revision changed: the first doubling under a tenth."""

from __future__ import annotations

from depthprune.healing.budget import first_written_budget

# the real curve of record's shape (archive/healing-curve-real.json): each doubling recovers more than the last
RISING = {4096: 3.121, 8192: 2.924, 16384: 2.592, 32768: 2.208}


def test_the_rule_as_first_written_takes_the_first_doubling_under_a_tenth():
    assert first_written_budget(RISING, 32768) == 4096  # 6.3% < 10%
    assert first_written_budget({4096: 1.0, 8192: 0.5, 16384: 0.25}, 16384) == 16384  # none under: the cap
    assert first_written_budget({4096: 1.0, 8192: 0.5, 16384: -0.1}, 16384) == 16384
    assert first_written_budget({4096: -0.1, 8192: -0.2}, 8192) == 4096  # already at the dense model
