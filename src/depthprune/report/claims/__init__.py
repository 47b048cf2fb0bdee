"""The paper's claims, each quoted from its own text and judged per grid against fixed thresholds.

    thresholds = load_thresholds()                       # report/claims.toml
    verdicts = judge_all(results, thresholds)            # one Verdict per (grid, claim)
    lines = render_claims(results, thresholds)           # markdown for REPORT.md

The text. Every :class:`depthprune.report.claims.base.Claim` quotes the sentence it tests
verbatim from the paper's own text, v2 of arXiv 2604.24938 ("Rethinking Layer Redundancy:
Calibration Matters More Than Search in LLM Depth Pruning",
``shared/paper/001_132f0670777f7341.txt``; a test checks each quote is in it). The third
party's summary of v1 (``000_…``) is never quoted as the paper: its figures (ρ from −0.78,
"1–3 points", "minutes … hours") are v1 summary (``000_…``), not in the paper's text, and no
verdict here rests on them.

The verdicts. Each claim has one pure judge of a grid's results (schema 2, as
:func:`depthprune.results.schema.read_result` returns them) and the thresholds; it returns one
:class:`depthprune.report.claims.base.Verdict` per grid, never pooling grids (grids differ in
models, sizes and data, so a pooled statistic would mean nothing). Outcomes are HELD, NOT
HELD, or NOT MEASURED (with the reason) when the results cannot speak to the claim. A
claim's statistic is computed per condition (or pair) and summarised by the median over
them, which is what its threshold is compared with (one number, one threshold); which
solutions count is :mod:`depthprune.report.claims.helpers`'s to say.

The layout. :mod:`depthprune.report.claims.base` defines a claim and its registry
(:data:`depthprune.report.claims.base.CLAIMS`), the thresholds and judging;
:mod:`depthprune.report.claims.helpers` the selection and statistics the claims share; one
module per family registers its claims: :mod:`depthprune.report.claims.overlap` (5.1),
:mod:`depthprune.report.claims.variance` (5.2), :mod:`depthprune.report.claims.rank` (5.3),
:mod:`depthprune.report.claims.search` (search gain, cost, convergence) and
:mod:`depthprune.report.claims.additivity` (3.3); :mod:`depthprune.report.claims.render`
writes the markdown. Importing this package imports every family module, so a new claim is
one module here plus one section of ``report/claims.toml``, whose order of sections is the
order of the claims in every table (``docs/extending/claim.md``).

The thresholds live in ``report/claims.toml``, fixed before REPORT.md is regenerated;
:func:`depthprune.report.claims.base.sensitivity` shows how each verdict moves across a range
of them.
"""

from __future__ import annotations

from depthprune.report.claims import helpers
from depthprune.report.claims.base import (
    CLAIMS,
    GENERAL,
    HELD,
    NOT_HELD,
    NOT_MEASURED,
    PAPER_TEXT,
    THRESHOLDS_FILE,
    Claim,
    ClaimRegistry,
    Measure,
    Rule,
    Verdict,
    judge_all,
    load_thresholds,
    register,
    sensitivity,
    verdict,
    with_threshold,
)
from depthprune.report.claims.render import quote_numbers, render_claims, render_quotes

#: modules of this package that define no claim
NOT_CLAIMS = ("base", "helpers", "render")
CLAIMS.discover(__name__, skip=NOT_CLAIMS)

__all__ = [
    "CLAIMS", "GENERAL", "HELD", "NOT_CLAIMS", "NOT_HELD", "NOT_MEASURED", "PAPER_TEXT", "THRESHOLDS_FILE", "Claim",
    "ClaimRegistry", "Measure", "Rule", "Verdict", "helpers", "judge_all", "load_thresholds", "quote_numbers",
    "register", "render_claims", "render_quotes", "sensitivity", "verdict", "with_threshold",
]
