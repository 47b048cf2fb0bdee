"""The healing curve's rule that turns its gaps into a grid's token budget (DESIGN.md, "Healing"), apart from the
curve that measures them (:mod:`depthprune.experiments.healing_curve`), so that the report can say what the rule
as first written would have picked without importing the experiments."""

from __future__ import annotations

from collections.abc import Mapping

SHARE = 0.10  # a doubling that recovers less than this share of the remaining gap ends the curve's budget


def choose_budget(gaps: Mapping[int, float], cap: int) -> tuple[int, str]:
    """The rule's budget from the mean gap at each point (tokens -> g(T)), and why: the first doubling that
    recovers less than ``SHARE`` of the gap left once the returns diminish (the rule as written in
    :mod:`depthprune.experiments.healing_curve`)."""
    points = sorted(t for t in gaps if t <= cap)
    before: float | None = None  # r at the previous point
    for t, nxt in zip(points, points[1:]):
        g, g2 = gaps[t], gaps[nxt]
        if g <= 0:
            return t, f"g({t}) = {g:.4f} <= 0: the heal already matches the dense model"
        share = (g - g2) / g
        if share < SHARE and before is not None and share <= before:
            return t, (f"doubling {t} -> {nxt} recovers {g - g2:.4f} of the {g:.4f} left "
                       f"({share:.1%} < {SHARE:.0%}, and no more than the doubling before: {before:.1%})")
        before = share
    return cap, (f"no doubling below the cap {cap} recovered less than {SHARE:.0%} of the gap left with the returns "
                 "diminishing: the cap")


def first_written_budget(gaps: Mapping[int, float], cap: int) -> int:
    """The budget the rule as first written (2026-12-06) takes from the same gaps: the first doubling under
    ``SHARE``, whether or not the returns diminish. Not a rule any more: REPORT says what the revision changed."""
    points = sorted(t for t in gaps if t <= cap)
    for t, nxt in zip(points, points[1:]):
        if gaps[t] <= 0 or (gaps[t] - gaps[nxt]) / gaps[t] < SHARE:
            return t
    return cap
