"""REPORT's healing-curve paragraph: which rule judged the curve, what the rule as first written would have picked
where that differs, and each model's time."""

from __future__ import annotations

from depthprune.experiments.healing_curve import REVISION, first_written_budget
from depthprune.report.healing import curve_lines

# the real curve of record's shape (archive/healing-curve-real.json): each doubling recovers more than the last
RISING = {"4096": 3.121, "8192": 2.924, "16384": 2.592, "32768": 2.208}


def curve(grid: str, **extra) -> dict:
    return {"grid": grid, "mean_gap": RISING, "budget": 32768, "cap": 32768, "why": "the cap", "jobs": 43,
            "limit_s": 21600, "cap_from": {"tokens_per_second": 171.5}, "points": [], "revision": REVISION,
            "points_seconds": 2213.1, **extra}


def test_the_rule_as_first_written_takes_the_first_doubling_under_a_tenth():
    gaps = {int(t): g for t, g in RISING.items()}
    assert first_written_budget(gaps, 32768) == 4096  # 6.3% < 10%
    assert first_written_budget({4096: 1.0, 8192: 0.5, 16384: 0.25}, 16384) == 16384  # none under: the cap
    assert first_written_budget({4096: 1.0, 8192: 0.5, 16384: -0.1}, 16384) == 16384
    assert first_written_budget({4096: -0.1, 8192: -0.2}, 8192) == 4096  # already at the dense model


def test_a_curve_judged_after_the_revision_says_what_the_first_rule_would_have_picked():
    text = "\n".join(curve_lines(curve("real")))
    assert "revised 2026-12-07" in text and "before this curve ran" in text
    assert "As first written the rule would have picked 4,096 tokens here." in text
    # a curve read before the revision says so in its own words, once
    tiny = "\n".join(curve_lines(curve("tiny")))
    assert "not a blind choice" in tiny and "would have picked" not in tiny


def test_each_models_time_is_printed_where_the_curve_records_it():
    text = "\n".join(curve_lines(curve("real", model_seconds={"gemma3-270m": 1376.7, "smollm2-135m": 953.6})))
    assert "(per model, the dense evaluation included: gemma3-270m 22.9 min, smollm2-135m 15.9 min)." in text
    assert "each timed when it ran." in "\n".join(curve_lines(curve("real")))
